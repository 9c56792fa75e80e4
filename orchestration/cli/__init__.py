"""The `seqline` command line: one module per command group (run, verify, runs, store, schedule,
scheduler and backfill, dashboard), the options and the console they share, and the app."""

from seqline.orchestration.cli.main import app, main_command

__all__ = ["app", "main_command"]
