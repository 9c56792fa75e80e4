"""`seqline lookup`: where one seq is in a stored run, stage by stage, as a table or JSON."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from seqline.orchestration.cli.console import Column, one_line, out, print_table
from seqline.orchestration.cli.options import ROOT_HELP, AsJson, fail, no_run, print_json
from seqline.orchestration.environment import DEFAULT_ROOT, ROOT_VARIABLE
from seqline.pipeline.errors import ConfigError, RunNotFound

__all__ = ["lookup"]


def _seq(text: str) -> int:
    """A seq as typed: a non-negative integer (else a usage error, exit 2, in one line)."""
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a seq; give a record's seq, a whole number "
                                 "such as 100") from None
    if value < 0:
        raise typer.BadParameter(f"{value} is not a seq; seq counts from 0")
    return value


def lookup(
    run_id: Annotated[str, typer.Argument(help="The run to look in.")],
    seq: Annotated[int, typer.Argument(parser=_seq, metavar="SEQ",
                                       help="The record's seq (its rank in source order).")],
    root: Annotated[str, typer.Option(envvar=ROOT_VARIABLE, help=ROOT_HELP)] = DEFAULT_ROOT,
    as_json: AsJson = False,
) -> None:
    """Where SEQ is in RUN_ID: its source line, shards, batch and training steps.

    Its source file and line, its shard and offset in each stored stage, its batch and the
    training step that consumed it; or what happened to it. Exit 0 when the run has the
    record (it reached at least its first stage), 1 when not.
    """
    # Here, not at the top: the lookup reads shards with NumPy and the TFRecord code, which
    # `seqline --help` does not need.
    from seqline.orchestration.lookup import lookup_seq

    try:
        place = lookup_seq(root, run_id, seq)
    except RunNotFound:
        no_run(run_id, root)
    except ConfigError as exc:
        fail(one_line(exc))
    gone = not place.stages or not place.stages[0].found
    if as_json:
        print_json(place.as_json())
    elif gone:  # not in the run at all: one line, what happened to it
        reason = f"stage {place.stages[0].stage!r}: {place.stages[0].line}" if place.stages \
            else "the run has no committed stage"
        out.print(Text(f"seq {seq:,} in {run_id}: {reason}"))
    else:
        print_table(out, [Column("stage"), Column("where", wraps=30)],
                    [[s.stage, Text(s.line) if s.found else Text(s.line, style="yellow")]
                     for s in place.stages], title=f"seq {seq:,} in {run_id}")
    if gone:
        raise typer.Exit(1)
