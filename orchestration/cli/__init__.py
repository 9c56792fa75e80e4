"""The `seqline` command line: one module per command group (run, verify, runs, store, schedule,
scheduler and backfill, dashboard), the options and the console they share, and the app.

This package's own import is light: the console script starts a local run's workers' fork
server before it loads the app (typer, rich and the commands take 0.1 s)."""

from __future__ import annotations

import os
import sys
from typing import Any

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

    main()


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
