"""A reader command's `--json`, run in the test's own process.

For tests whose subject is something else (a scheduler, a fault) and that look at the run
store while it happens: a `seqline` process costs about 0.45 CPU-seconds of imports, and a
test that looks every few seconds for minutes spent 40 of them (decision 48). The command
is the one a user runs, through Typer's own test runner; the tests of the commands
themselves still run real processes.
"""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from seqline.orchestration.cli import app


def read_json(*args: str) -> Any:
    """`seqline ARGS --json`'s document; fails the test with its error when it exits non-0.

    Example: `read_json("runs", "list", "--root", str(root))` -> [{"run_id": ...}, ...]
    """
    result = CliRunner().invoke(app, [*args, "--json"], prog_name="seqline")
    assert result.exit_code == 0, f"seqline {' '.join(args)}: {result.output}"
    return json.loads(result.stdout)
