"""The `seqline` command line: one module per command group (run, verify, runs, store, schedule,
scheduler and backfill, dashboard), the options and the console they share, and the app.

This package's own import is light: the console script starts a local run's workers' fork
server before it loads the app (typer, rich and the commands take 0.1 s)."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Any, NoReturn

__all__ = ["app", "main_command"]


def main_command() -> None:
    """The `seqline` console script (see seqline.orchestration.cli.main.main_command).

    `seqline run` on the local runner starts its workers' fork server first, before the command
    line is parsed: the server imports Arrow, the coders and pandas in its own process while
    this one imports the CLI and the rest, so that the first block finds a worker ready
    (decision 49). The run starts it there otherwise (global flags before `run`, --json).
    """
    if _runs_locally(sys.argv[1:]):
        from seqline.orchestration.environment import LAST_WORDS_FD, quiet_engines
        from seqline.orchestration.runners.forked import PRELOAD, start_early

        if LAST_WORDS_FD not in os.environ:  # launched by the scheduler: see take_launcher_pipe
            quiet_engines()  # the server's environment, as the app's defaults set it
            start_early(PRELOAD)
    from seqline.orchestration.cli.main import main_command as main

    try:
        main()
    except SystemExit as done:
        _exit(done.code)


def _exit(code: object) -> NoReturn:
    """Exit as `sys.exit(code)` does, without CPython's teardown of every module imported
    (Arrow, NumPy, SQLAlchemy, pydantic, typer): 0.1 s of CPU that every `seqline` command
    spent after its work was done and its output written. What Py_FinalizeEx does first is
    done here the same: non-daemon threads joined, atexit handlers run (the worker pool's,
    multiprocessing's, Ray's, coverage's), the standard streams flushed; a failed flush exits
    120, as CPython's does. C-level destructors are skipped, as in a worker's os._exit."""
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if not isinstance(code, int | None):
        print(code, file=sys.stderr)
    threading._shutdown()  # type: ignore[attr-defined]  # Py_FinalizeEx's first step
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, a full disk; ValueError: closed
            status = status or 120
    os._exit(status)


def _runs_locally(args: list[str]) -> bool:
    """`seqline run ...` that runs on the local runner, without options that change how (the
    output's: --json; none to run: --help, --dry-run)."""
    if args[:1] != ["run"] or any(a in ("--help", "--dry-run", "--json") for a in args):
        return False
    for i, arg in enumerate(args):
        if arg == "--runner":
            return args[i + 1:i + 2] == ["local"]
        if arg.startswith("--runner="):
            return arg == "--runner=local"
    return True


def __getattr__(name: str) -> Any:
    if name == "app":
        from seqline.orchestration.cli.main import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
