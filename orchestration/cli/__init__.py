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

    `seqline run` on the local runner (or Beam's multi_processing) starts its workers' fork
    server first, before the command line is parsed: the server imports Arrow, the coders and
    pandas (and Beam) in its own process while this one imports the CLI and the rest, so that
    the first block finds a worker ready (decision 49). The run starts it there otherwise
    (global flags before `run`, --json).
    """
    if preload := _preload_of(sys.argv[1:]):
        from seqline.orchestration.environment import LAST_WORDS_FD, quiet_engines
        from seqline.orchestration.runners.forked import start_early

        if LAST_WORDS_FD not in os.environ:  # launched by the scheduler: see take_launcher_pipe
            quiet_engines()  # the server's environment, as the app's defaults set it
            start_early(preload)
    try:
        from seqline.orchestration.cli.main import main_command as main

        main()
    except SystemExit as done:
        _exit(done.code)
    except KeyboardInterrupt:
        # Ctrl-C before the app took over (while it imports: the first ~0.3 s of every
        # command) ends as a Ctrl-C the app sees does (Typer's exit 130), not in a traceback
        # of whichever import it landed in.
        _exit(130)


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


def _preload_of(args: list[str]) -> list[str] | None:
    """For `seqline run ...` whose workers fork from a fork server here (the local runner's,
    Beam's multi_processing), that server's preload; None for other commands, and where
    options change how it runs (the output's: --json) or nothing runs (--help, --dry-run)."""
    if args[:1] != ["run"] or any(a in ("--help", "--dry-run", "--json") for a in args):
        return None
    given = {"--runner": "local", "--beam-mode": "multi_processing"}
    beam_options = []
    for i, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if not equals:  # `--runner beam`, not `--runner=beam`
            value = args[i + 1] if i + 1 < len(args) else ""
        if name in given:
            given[name] = value
        elif name == "--beam-option":
            beam_options.append(value)
    from seqline.orchestration.runners.forked import workers_preload

    return workers_preload(given["--runner"], given["--beam-mode"], beam_options)


def __getattr__(name: str) -> Any:
    if name == "app":
        from seqline.orchestration.cli.main import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
