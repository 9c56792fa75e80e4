"""Numbers written one way, and tables that keep ids and statuses whole at any width."""

from __future__ import annotations

import pytest
from rich.console import Console

from seqline.orchestration.cli.console import (
    Column,
    fitted_table,
    format_count,
    format_metric,
    format_rate,
    format_seconds,
    format_time,
    print_fields,
    print_table,
)


@pytest.mark.parametrize(("value", "text"), [
    (2411.7, "2,410"), (483.2, "483"), (999.6, "1,000"), (48.27, "48.3"), (0.012345, "0.0123"),
    (1234567.0, "1,230,000"), (5.0, "5.00"), (0, "0"), (None, ""),
])
def test_console_rate_has_three_significant_digits(value, text):
    assert format_rate(value) == text


def test_console_counts_seconds_metrics_and_times_are_written_one_way():
    assert format_count(1461000) == "1,461,000" and format_count(None) == ""
    assert format_seconds(0.021125670999992963) == "0.02"
    assert format_seconds(1234.5) == "1,234.50"
    assert format_metric(5.8796999951482576e-05) == "5.88e-05"
    assert format_metric(2.934712) == "2.935"
    assert format_time("2026-11-24T13:17:00+00:00") == "2026-11-24 13:17:00"
    assert format_time("2026-11-24T13:17:00+01:00") == "2026-11-24T13:17:00+01:00"
    assert format_time(None) == ""


COLUMNS = [Column("run"), Column("status"), Column("pipeline", 1), Column("started", 2),
           Column("seconds", 3, "right"), Column("runner", 4)]
ROWS = [["20261124T131903Z-ca7d", "interrupted", "readings_data", "2026-11-24 13:19:03",
         "1,234.50", "local"]]


def _headers(width: int | None) -> tuple[list[str], list[str]]:
    table, hidden = fitted_table(COLUMNS, ROWS, width)
    return [str(c.header) for c in table.columns], hidden


@pytest.mark.parametrize(("width", "shown"), [
    (None, ["run", "status", "pipeline", "started", "seconds", "runner"]),
    (200, ["run", "status", "pipeline", "started", "seconds", "runner"]),
    # 1 + (21 + 3) + (11 + 3) + (13 + 3) + (19 + 3) = 77: started fits 80, seconds does not
    (80, ["run", "status", "pipeline", "started"]),
    (77, ["run", "status", "pipeline", "started"]),
    (76, ["run", "status", "pipeline", "seconds", "runner"]),  # the next that fit, in order
    (40, ["run", "status"]),  # never dropped, even when they do not fit
])
def test_console_fitted_table_keeps_what_fits_by_priority(width, shown):
    headers, hidden = _headers(width)
    assert headers == shown
    assert hidden == [c.header for c in COLUMNS if c.header not in shown]


@pytest.mark.parametrize("width", [40, 60, 80, 100])
def test_console_printed_table_never_cuts_an_id_or_a_status(width):
    out = Console(width=width, force_terminal=True, color_system=None, record=True)
    print_table(out, COLUMNS, ROWS)
    text = out.export_text()
    assert "20261124T131903Z-ca7d" in text and "interrupted" in text and "…" not in text
    table_lines = [line for line in text.splitlines() if line.startswith(("┃", "│", "┏", "└"))]
    if width >= 80:  # the columns that are always shown fit: the table fits too
        assert max(len(line) for line in table_lines) <= width
    assert ("--wide adds: " in text) == (width < 96)  # 96: every column fits


def test_console_piped_table_has_every_column_and_no_note():
    out = Console(width=10_000, force_terminal=False, record=True)
    print_table(out, COLUMNS, ROWS)
    text = out.export_text()
    assert all(c.header in text for c in COLUMNS) and "--wide" not in text


def test_console_cells_are_text_not_markup_and_control_characters_are_escaped():
    out = Console(width=200, force_terminal=True, record=True)
    print_table(out, [Column("run"), Column("status")], [["[red]x[/]", "a\nb"]])
    text = out.export_text()
    assert "[red]x[/]" in text and "a\\nb" in text
    # no highlighter on data: the digits of an id are not painted
    styled = Console(width=200, force_terminal=True, color_system="truecolor", record=True)
    print_table(styled, [Column("run")], [["20261124T131903Z-ca7d"]])
    assert "\x1b[1;36m2026" not in styled.export_text(styles=True)


def test_console_columns_always_shown_stay_whole_on_a_terminal_too_narrow_for_them():
    out = Console(width=30, force_terminal=True, color_system=None, record=True)
    print_table(out, COLUMNS, ROWS)
    text = out.export_text()
    assert "│ 20261124T131903Z-ca7d │ interrupted │" in text  # the terminal wraps the line
    assert "--wide adds: pipeline, started, seconds, runner" in " ".join(text.split())


def test_console_a_column_blank_in_every_row_yields_to_one_with_something_to_say():
    """The run table at 80 columns showed `filtered` (all 0) and hid `dead-lettered` (2, 10):
    same priority, first come first served. A column that says nothing comes after."""
    columns = [Column("stage"), Column("filtered", 1, "right"), Column("dead-lettered", 1, "right")]
    rows = [["read", "0", "2"], ["features", "0", "10"]]
    table, hidden = fitted_table(columns, rows, 30)
    assert [str(c.header) for c in table.columns] == ["stage", "dead-lettered"]
    assert hidden == ["filtered"]


def test_console_a_column_empty_in_every_row_is_left_to_wide_on_a_terminal():
    """`backfill` at 80 columns hid its fire times and showed an empty `reason` column."""
    columns = [Column("run"), Column("fire time", 1), Column("reason", 2)]
    rows = [["nightly-backfill-20261128T000000Z", "2026-11-28 00:00:00", ""],
            ["nightly-backfill-20261129T000000Z", "2026-11-29 00:00:00", None]]
    table, hidden = fitted_table(columns, rows, 50)
    assert [str(c.header) for c in table.columns] == ["run"]
    assert hidden == ["fire time", "reason"]
    assert [str(c.header) for c in fitted_table(columns, rows, None)[0].columns] == [
        "run", "fire time", "reason"]  # a pipe, a file, --wide: every column


def test_console_prose_wraps_in_the_width_left_and_ids_stay_whole():
    """`--dry-run`'s reasons at 80 columns: `why` (prose) is shown, wrapped at words in what
    the always-shown columns and `component` leave, instead of folded away."""
    reason = "params changed (shard_records 250 → 200); upstream `examples` runs again"
    columns = [Column("stage"), Column("action"), Column("why", 1, wraps=24),
               Column("component", 2)]
    rows = [["examples", "run", reason, "tfrecord_write"]]
    out = Console(width=70, force_terminal=True, color_system=None, record=True)
    print_table(out, columns, rows)
    text = out.export_text()
    lines = [line for line in text.splitlines() if line.startswith("│")]
    assert len(lines) > 1 and max(len(line) for line in lines) <= 70, text
    assert "tfrecord_write" in lines[0] and "examples" in lines[0]
    words = " ".join(line.split("│")[3].strip() for line in lines)
    assert words == reason and "--wide adds" not in text
    piped = Console(width=10_000, force_terminal=False, record=True)
    print_table(piped, columns, rows)
    assert reason in piped.export_text()  # whole, on one line


@pytest.mark.parametrize("width", [20, 40, 60, 80])
def test_console_prose_never_cuts_or_breaks_a_word(width):
    """A reason naming a long run id, a place naming a path: wrapped at spaces only, however
    narrow the terminal (rich's columns cut a word longer than them with …)."""
    run_id = "nightly-weather-backfill-20261123T020000Z"
    columns = [Column("stage"), Column("why", 0, wraps=20)]
    rows = [["examples", f"reused from run {run_id} (took 0.07 s)"],
            ["read", "/tmp/a/rather/deep/folder/of/inputs/in.csv, line 7 (record 5)"]]
    out = Console(width=width, force_terminal=True, color_system=None, record=True)
    print_table(out, columns, rows)
    text = out.export_text()
    assert "…" not in text
    words = " ".join(line.split("│")[2].strip() for line in text.splitlines()
                     if line.startswith("│")).split()
    assert run_id in words and "/tmp/a/rather/deep/folder/of/inputs/in.csv," in words


def test_console_fields_are_whole_lines_without_trailing_spaces():
    out = Console(width=10_000, force_terminal=False, record=True)
    print_fields(out, [("run_id", "r1"), ("finished", ""), ("error", "a" * 300)])
    assert out.export_text().splitlines() == ["run_id    r1", "finished", "error     " + "a" * 300]
