"""Click's usage errors as seqline's one line: `<what>; <how to fix>`, no "Value error,"."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from seqline.orchestration.cli import app
from seqline.orchestration.cli.options import usage_line


@pytest.mark.parametrize(("args", "line"), [
    (["run", "p.yaml", "--runner", "nosuch"],
     "invalid --runner: 'nosuch' is not one of 'local', 'beam', 'ray'; see `seqline run --help`"),
    (["runs", "list", "--status", "bogus"],
     "invalid --status: 'bogus' is not one of 'queued', 'running', 'succeeded', 'failed', "
     "'interrupted', 'cancelled'; see `seqline runs list --help`"),
    (["runs", "list", "--limit", "0"],
     "invalid --limit: input should be greater than or equal to 1; see `seqline runs list "
     "--help`"),
    (["runs", "list", "--bogus"], "no such option: --bogus; see `seqline runs list --help`"),
    (["runs", "show"], "missing argument 'run_id'; see `seqline runs show --help`"),
    (["run", "p.yaml", "--run-id", "one", "-q"], "no such option: -q; it is seqline's own "
     "option, given before the command: `seqline -q run …`"),
    (["runs", "list", "--debug"], "no such option: --debug; it is seqline's own option, given "
     "before the command: `seqline --debug runs list …`"),
    (["runs", "lst"], "no such command 'lst'; did you mean 'list'?; see `seqline runs --help`"),
])
def test_usage_line_rewords_clicks_usage_errors(args, line):
    result = CliRunner().invoke(app, args, prog_name="seqline", standalone_mode=False)
    assert usage_line(result.exception) == line
