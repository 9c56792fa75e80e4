"""`seqline store rebuild`: the run store itself, recreated from the run folders."""

from __future__ import annotations

import typer

from seqline.orchestration.cli.options import RootUrl, Store, fail, opened, say
from seqline.orchestration.environment import DEFAULT_ROOT
from seqline.pipeline.errors import SeqlineError

__all__ = ["store_app"]

store_app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                        help="The run store itself.")


@store_app.callback()
def store_main() -> None:
    """The run store itself (a group even with one command, so `store rebuild` stays)."""


@store_app.command("rebuild")
def rebuild_command(root: RootUrl = DEFAULT_ROOT,
                    store: Store = None) -> None:
    """Recreate the store's rows from ROOT/runs/*/run.json and the stage manifests."""
    from seqline.pipeline.storage import open_root  # fsspec: loaded when the command runs

    try:
        runs_folder = open_root(root) / "runs"
    except SeqlineError as exc:
        fail(str(exc))
    if not runs_folder.exists():  # a typo in --root: no empty store made there
        fail(f"no runs under {runs_folder}; pass the --root the runs were written under")
    with opened(root, store, create=True) as runs:
        added = runs.rebuild(root)
        url = runs.url
    folder = f"{str(root).rstrip('/')}/runs"
    say(f"indexed {added} run(s) from {folder} into {url}" if added else
        f"indexed 0 run(s): {url} already holds every run under {folder}")

