"""`seqline verify`: check a run's artifacts against the ordering contract, as a table or JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.text import Text

from seqline.orchestration.cli.console import (
    Column,
    err,
    format_count,
    one_line,
    out,
    print_table,
)
from seqline.orchestration.cli.options import (
    ROOT_HELP,
    AsJson,
    Wide,
    fail,
    no_run,
    print_json,
)
from seqline.orchestration.environment import DEFAULT_ROOT, ROOT_VARIABLE
from seqline.pipeline.errors import ConfigError, RunNotFound

if TYPE_CHECKING:
    from seqline.orchestration.verify import StageCheck

__all__ = ["print_checks", "print_problems", "verify"]


def verify(
    run_id: Annotated[str, typer.Argument(help="The run to check.")],
    root: Annotated[str, typer.Option(envvar=ROOT_VARIABLE, help=ROOT_HELP)] = DEFAULT_ROOT,
    as_json: AsJson = False,
    wide: Wide = False,
) -> None:
    """Check RUN_ID's artifacts: shard order, coverage, counts, checksums. Exit 0 if all hold.

    With --json, the verdict as runs/RUN_ID/verify.json holds it; the exit code is the same.
    """
    # Here, not at the top: verify reads shards with Arrow and the components, which
    # `seqline --help` does not need.
    from seqline.orchestration.verify import verdict, verify_run

    try:
        checks = verify_run(root, run_id)
    except RunNotFound:
        no_run(run_id, root)
    except ConfigError as exc:
        fail(one_line(exc))
    if as_json:
        print_json(verdict(checks))
        ok = print_problems(checks, err)
    else:
        ok = print_checks(run_id, checks, wide)
    if not ok:
        raise typer.Exit(1)


VERIFY_COLUMNS = [Column("stage"), Column("contract"), Column("records", 1, "right"),
                  Column("shards", 2, "right"), Column("dead letters", 3, "right"),
                  Column("component", 4)]


def print_checks(run_id: str, checks: list[StageCheck], wide: bool = False) -> bool:
    """The verify table, then each problem in full; True if every stage holds."""
    rows: list[list[str | Text]] = [[
        c.stage, Text("ok", "green") if c.ok else Text(f"{len(c.problems)} problem(s)", "red"),
             format_count(c.records), format_count(c.shards), format_count(c.dead_letters),
             c.component] for c in checks]
    print_table(out, VERIFY_COLUMNS, rows, wide=wide, title=f"verify {run_id}")
    from seqline.orchestration.verify import breaks_contract  # (loaded: it made `checks`)

    ok = print_problems(checks, out)
    broken = breaks_contract(p for c in checks for p in c.problems)
    out.print("All artifacts hold the ordering contract." if ok else
              "The run's artifacts break the contract; see the problems above." if broken else
              "The run did not commit every stage; what it committed holds the contract.")
    return ok


def print_problems(checks: list[StageCheck], where: Console) -> bool:
    """Each problem on a line of its own, led by its stage; True if there is none."""
    for c in checks:
        for problem in c.problems:
            where.print(f"[red]{c.stage}[/]: {problem}", highlight=False)
    return all(c.ok for c in checks)
