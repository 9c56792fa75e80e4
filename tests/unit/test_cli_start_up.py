"""The CLI starts without its engines: building the commands and printing any command's help
loads no Arrow, NumPy, SQLAlchemy, TensorFlow, Beam, Ray nor Starlette (issue 28; the times
are benchmarks/startup.py's), and `seqline --help` still lists every command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXE = str(Path(sys.executable).parent / "seqline")
ENGINES = ["apache_beam", "numpy", "pandas", "pyarrow", "ray", "sqlalchemy", "starlette",
           "tensorflow"]
# Every command and group, and each group's commands (a command dropped from the app, or one
# whose options no longer resolve once its imports moved, fails here).
COMMANDS = {"backfill": [], "dashboard": [], "lookup": [], "run": [], "schema": [], "scheduler": [],
            "verify": [], "runs": ["list", "logs", "show"], "store": ["rebuild"],
            "schedule": ["add", "export", "list", "pause", "remove", "resume", "show"]}

# Runs in a fresh interpreter (this one has loaded the engines for other tests): each help
# through the app, then the engines' top-level packages then in sys.modules.
EVERY_HELP = """
import json, sys
from typer.testing import CliRunner
from seqline.orchestration.cli import app
paths = [[]] + [[c] for c in COMMANDS] + [[c, s] for c, subs in COMMANDS.items() for s in subs]
helps = {" ".join(p): CliRunner().invoke(app, [*p, "--help"], prog_name="seqline")
         for p in paths}
print(json.dumps({
    "helps": {p: [r.exit_code, r.output] for p, r in helps.items()},
    "engines": sorted(m for m in sys.modules if m.split(".")[0] in ENGINES)}))
"""


def _listed(help_text: str) -> list[str]:
    """The command names a help's "Commands:" section lists (click's plain form)."""
    section = help_text.split("Commands:", 1)[1]
    return sorted(line.split()[0] for line in section.splitlines() if line.strip())


def test_cli_import_loads_no_engine():
    code = ("import json, sys, seqline.orchestration.cli.main; print(json.dumps(sorted("
            f"m for m in sys.modules if m.split('.')[0] in {ENGINES!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert json.loads(done.stdout) == []


def test_cli_every_help_loads_no_engine():
    script = f"COMMANDS = {COMMANDS!r}\nENGINES = {ENGINES!r}\n{EVERY_HELP}"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True, timeout=120)
    found = json.loads(done.stdout)
    for path, (code, output) in found["helps"].items():
        assert code == 0 and f"Usage: seqline {path}".rstrip() in output, (path, output)
    for group, subcommands in COMMANDS.items():
        if subcommands:
            assert _listed(found["helps"][group][1]) == subcommands, group
    assert found["engines"] == []


def test_cli_help_lists_every_command():
    done = subprocess.run([EXE, "--help"], capture_output=True, text=True, check=True,
                          timeout=120)
    assert _listed(done.stdout) == sorted(COMMANDS), done.stdout
