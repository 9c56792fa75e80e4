"""The CLI starts without its engines: building the commands and printing any command's help
loads no Arrow, NumPy, SQLAlchemy, TensorFlow, Beam, Ray nor Starlette (issue 28; the times
are benchmarks/startup.py's), and `seqline --help` still lists every command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

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


# The console script with an atexit handler of the caller's registered first.
AT_EXIT = """
import atexit, sys
atexit.register(lambda: print("atexit ran", file=sys.stderr))
sys.argv = ["seqline", *sys.argv[1:]]
from seqline.orchestration.cli import main_command
main_command()
print("not reached", file=sys.stderr)
"""


def test_the_console_script_exits_as_sys_exit_does_without_the_teardown(tmp_path):
    """It leaves by os._exit, skipping CPython's teardown of every module it imported (0.1 s
    a command): after the atexit handlers, with its output whole and its exit code."""
    helped, missing = (subprocess.run([sys.executable, "-c", AT_EXIT, *args],
                                      capture_output=True, text=True, timeout=120)
                       for args in (["--help"], ["runs", "show", "nosuch", "--root",
                                                 str(tmp_path)]))
    assert helped.returncode == 0 and _listed(helped.stdout) == sorted(COMMANDS), helped.stderr
    assert missing.returncode == 2 and "no run store at" in missing.stderr, missing.stderr
    for done in (helped, missing):
        assert done.stderr.splitlines()[-1] == "atexit ran", done.stderr


# A data-only run in a fresh interpreter (threads: no worker processes to look into).
DATA_RUN = """
import json, sys
from pathlib import Path

import pytest
from seqline.components import COMPONENTS
from seqline.orchestration.api import run_pipeline
from seqline.orchestration.runners import make_runner
from seqline.pipeline.config import parse_pipeline
folder = Path(sys.argv[1])
(folder / "in.csv").write_text("k,x,s\\n" + "".join(f"{i},{i / 3},s{i % 5}\\n" for i in range(300)))
spec = parse_pipeline(TEXT, folder, COMPONENTS)
with make_runner("local", workers=2, mode="thread") as runner:
    run_pipeline(spec, runner, folder / "root", "r")
print(json.dumps(sorted(m for m in UNNEEDED if m in sys.modules)))
"""
DATA_PIPELINE = """
name: tiny
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 64}}
  - {name: examples, component: tfrecord_write}
"""


# What a local CSV run's driver does without (issue 28's fixed cost): pandas, which pyarrow
# imports on its first conversion of a NumPy array or a Python value (0.3 s; the driver numbers,
# profiles and stores records without one, blocks.numbers); fsspec (40 ms with asyncio: local
# files are Python's own, readers.py); Parquet's reader (24 ms with pyarrow.fs and ssl).
UNNEEDED = ["fsspec", "pandas", "pyarrow.fs", "pyarrow.parquet"]


def test_a_local_data_run_leaves_pandas_fsspec_and_parquet_unimported(tmp_path):
    script = f"TEXT = {DATA_PIPELINE!r}\nUNNEEDED = {UNNEEDED!r}\n{DATA_RUN}"
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []


@pytest.mark.parametrize(("args", "server"), [
    (["run", "p.yaml"], "local"),
    (["run", "p.yaml", "--runner", "local", "--workers", "2"], "local"),
    (["run", "p.yaml", "--runner", "beam"], "beam"),
    (["run", "p.yaml", "--runner=beam", "--beam-mode=multi_processing"], "beam"),
    (["run", "p.yaml", "--runner", "beam", "--beam-mode", "in_memory"], None),
    (["run", "p.yaml", "--runner", "beam", "--beam-option", "runner=FlinkRunner"], None),
    (["run", "p.yaml", "--runner", "beam", "--beam-option=temp_location=/tmp/x"], "beam"),
    (["run", "p.yaml", "--runner", "ray"], None),
    (["run", "p.yaml", "--runner", "beam", "--json"], None),  # started by the run itself
    (["run", "p.yaml", "--dry-run"], None),
    (["runs", "list"], None),
])
def test_a_run_starts_the_fork_server_its_workers_fork_from_before_parsing(args, server):
    """The console script starts the local runner's fork server, or Beam's (multi_processing
    on the FnApiRunner), while it imports the rest; none for Ray, Beam's threads or other Beam
    runners, which fork no worker here."""
    from seqline.orchestration.cli import _preload_of
    from seqline.orchestration.runners.forked import BEAM_PRELOAD, PRELOAD

    assert _preload_of(args) == {"local": PRELOAD, "beam": BEAM_PRELOAD, None: None}[server]
