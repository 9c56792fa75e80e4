"""Stage samples as chart columns, read incrementally: each read fetches only the new rows.

A running stage gains a sample a second, and its pages are re-rendered on every change of
the run (every ~2 s): reading all of an hour-long stage's 3,600 samples each time would cost
more than everything else a page does. The rows read so far are kept per stage run; a later
read asks only for rows after the newest one kept. That is exact because a stage run's
samples come from one sampler thread (orchestration/recorder.py), in time order, committed
in order: a row the store has not shown yet is always newer than every row it has shown.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from seqline.orchestration.store import RunReader
from seqline.orchestration.store.statements import SAMPLE_COLUMNS

__all__ = ["COLUMNS", "MAX_POINTS", "SampleCache", "counted_once", "ended_at", "from_start",
           "until"]

COLUMNS = SAMPLE_COLUMNS  # a chart's columns: the sample rows' own, in their order
# A chart of a long run stays light: at most this many points per stage (every k-th sample).
MAX_POINTS = 1500
# Stage runs whose rows are kept: every stage of the runs somebody is looking at.
KEPT_STAGE_RUNS = 64


class _Rows:
    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.columns: dict[str, list[Any]] | None = None  # made from all of `rows`
        # counted_once(columns) for the records_in and end it was made for (a stage ends once)
        self.counted: tuple[tuple[int | None, float | None], dict[str, list[Any]]] | None = None

    def counted_for(self, records_in: int | None, started: Any, end: float | None
                    ) -> dict[str, list[Any]]:
        """The columns from `started` to `end`, counted as counted_once counts them, made
        once per records_in and end."""
        if self.counted is None or self.counted[0] != (records_in, end):
            shown = until(from_start(self.columns or {}, started), end)
            self.counted = ((records_in, end), counted_once(shown, records_in, started))
        return self.counted[1]


class SampleCache:
    """Each stage run's samples read so far, and its columns for a chart.

    Keyed by the stage run's id and start time, so that an id the database reuses after a
    run is deleted never extends another stage's rows.
    """

    def __init__(self, size: int = KEPT_STAGE_RUNS) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[int, Any], _Rows] = OrderedDict()
        self._lock = threading.Lock()

    def series(self, reader: RunReader,
               stages: list[tuple[int, Any, str, int | None, float | None]]
               ) -> dict[str, dict[str, list[Any]]]:
        """Samples of some stage runs as columns a chart can draw.

        Args:
            reader: the store's reads (one connection for all the stages).
            stages: (stage_run_id, started, label, records_in, end) each; records_in is the
                ended stage's count (None while it runs), see counted_once; end its end
                (ended_at; None while it runs), see until.

        Returns:
            {label: {"t": [...], "records_done", "rows_per_s", "waited_input",
            "waited_output", "in_flight", "reorder_held": [...]}}, thinned to at most
            MAX_POINTS each (see _thinned: the newest always kept, peaks kept). Shared:
            callers only read them.
        """
        with self._lock:  # one reader at a time per cache: the rows are appended in place
            keys = list(dict.fromkeys((stage_run_id, started) for stage_run_id, started, *_
                                      in stages))
            kept = {key: self._kept_for(key) for key in keys}
            # Each stage run's rows after the newest kept (its t): one connection for all.
            news = reader.sample_rows([(key[0], kept[key].rows[-1][0] if kept[key].rows
                                        else None) for key in keys])
            for key, new in zip(keys, news, strict=True):
                if new or kept[key].columns is None:
                    kept[key].rows.extend(new)
                    kept[key].columns = _thinned(kept[key].rows)
                    kept[key].counted = None
            return {label: kept[(stage_run_id, started)].counted_for(records_in, started, end)
                    for stage_run_id, started, label, records_in, end in stages}

    def _kept_for(self, key: tuple[int, Any]) -> _Rows:
        """The rows kept for a stage run (made empty when new), now the most recently used."""
        kept = self._kept.pop(key, None) or _Rows()
        self._kept[key] = kept
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return kept


def _thinned(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """At most MAX_POINTS points: consecutive samples in groups, each drawn at its last
    sample (the newest always shows) with the group's peaks (in_flight, reorder_held: a
    peak of 6 in a thinned stretch is still 6), its mean rate and its last counters."""
    step = max(1, -(-len(rows) // MAX_POINTS))
    if step == 1:
        return {c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)}
    shown = []
    for start in range(0, len(rows), step):
        group = rows[start:start + step]
        point = list(group[-1])
        for i in _PEAKS:
            point[i] = max((r[i] for r in group if r[i] is not None), default=None)
        rates = [r[_RATE] for r in group if r[_RATE] is not None]
        point[_RATE] = sum(rates) / len(rates) if rates else None
        shown.append(point)
    return {c: [p[i] for p in shown] for i, c in enumerate(COLUMNS)}


_PEAKS = (COLUMNS.index("in_flight"), COLUMNS.index("reorder_held"))
_RATE = COLUMNS.index("rows_per_s")


def from_start(columns: dict[str, list[Any]], started: float | None) -> dict[str, list[Any]]:
    """The columns with a first point at the stage's start (Unix seconds): nothing done,
    nothing waited, the rest unknown.

    A sample's rate covers the interval since the sample before it, the first sample's since
    the stage started; a chart draws each rate over the interval before its point, so without
    this point the records of the first interval were never drawn: a stage of two samples a
    second apart charted about half its table's records/s (CI run 13).

    Example: t [10.5, 11.5], records_done [600, 1170], started 10.0 -> t [10.0, 10.5, 11.5],
    records_done [0, 600, 1170].
    """
    times = columns.get("t") or []
    if started is None or not times or started >= times[0]:
        return columns
    first = {"t": started, "records_done": 0, "waited_input": 0.0, "waited_output": 0.0}
    return {c: [first.get(c), *values] for c, values in columns.items()}


def ended_at(stage: dict[str, Any]) -> float | None:
    """When a stage ended as its table counts it: its start (`t0`) plus its `seconds`, the
    stage's own clock, else its row's finish time (`t1`); None while it runs.

    The row's finish time is when the store recorded the commit: after the stage's output
    was flushed and its manifest written, and after the recorder's write waited its turn
    at the database. On a loaded machine that was 1.73 s for a read whose table said 1.40 s
    at 1,040 records/s, and its chart, spread over 1.73 s, peaked at 875.

    Example: t0 100.0, t1 101.73, seconds 1.40 -> 101.40; a reused stage (t0 None) -> t1.
    """
    t0, t1, seconds = stage.get("t0"), stage.get("t1"), stage.get("seconds")
    if t0 is None or t1 is None or seconds is None:
        return t1
    return min(t1, t0 + seconds)


def until(columns: dict[str, list[Any]], end: float | None) -> dict[str, list[Any]]:
    """The columns of a finished stage, ending at its end: samples taken after it (the last
    one, as its commit was recorded) are drawn at the end, as one point holding the newest
    counters and the largest peaks.

    Example: t [10.5, 11.5, 11.8], records_done [600, 1400, 1461], end 11.4 -> t [10.5, 11.4],
    records_done [600, 1461].
    """
    times = columns.get("t") or []
    if end is None or not times or times[-1] <= end:
        return columns
    cut = next(i for i, t in enumerate(times) if t > end)
    out = {c: values[:cut] + values[-1:] for c, values in columns.items()}
    out["t"][-1] = end
    for name in ("in_flight", "reorder_held"):
        if name in columns:
            out[name][-1] = max((v for v in columns[name][cut:] if v is not None), default=None)
    return out


def counted_once(columns: dict[str, list[Any]], records_in: int | None,
                 started: float | None = None) -> dict[str, list[Any]]:
    """An ended stage's progress counted as its table counts it: each input record once.

    The table's rate is records_in over seconds, but a stage's samples count what it has
    done: training counts every epoch's records (15 epochs of 1,155 windows: 17,325), and
    batching and evaluation count theirs only when they commit (0 until the end). Drawn as
    is, the train stage's chart read ~1,000 records/s beside a table saying 65. So once the
    stage has ended (records_in known), records_done is rescaled to end at records_in
    (rows_per_s with it); a stage whose samples never counted a record is drawn at its
    average, a straight line from 0 at its start (`started`, Unix seconds) to records_in.
    A running stage (records_in None) is drawn as sampled, as its table row shows it.

    Example: records_done [0, 8000, 17325] with records_in 1155 -> [0, 533.3, 1155].
    """
    done = columns.get("records_done") or []
    if records_in is None or not done or done[-1] == records_in:
        return columns
    out = dict(columns)
    if done[-1]:
        scale = records_in / done[-1]
        out["records_done"] = [None if v is None else v * scale for v in done]
        out["rows_per_s"] = [None if v is None else v * scale for v in columns["rows_per_s"]]
        return out
    times = columns["t"]
    start = started if started is not None and started < times[-1] else times[0]
    span = times[-1] - start
    if span <= 0:
        return columns
    out["records_done"] = [records_in * max(0.0, t - start) / span for t in times]
    out["rows_per_s"] = [records_in / span] * len(times)
    return out
