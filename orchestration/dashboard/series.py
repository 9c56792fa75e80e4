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

__all__ = ["COLUMNS", "MAX_POINTS", "SampleCache"]

COLUMNS = SAMPLE_COLUMNS  # a chart's columns: the sample rows' own, in their order
# A chart of a long run stays light: at most this many points per stage (every k-th sample).
MAX_POINTS = 1500
# Stage runs whose rows are kept: every stage of the runs somebody is looking at.
KEPT_STAGE_RUNS = 64


class _Rows:
    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.columns: dict[str, list[Any]] | None = None  # made from all of `rows`


class SampleCache:
    """Each stage run's samples read so far, and its columns for a chart.

    Keyed by the stage run's id and start time, so that an id the database reuses after a
    run is deleted never extends another stage's rows.
    """

    def __init__(self, size: int = KEPT_STAGE_RUNS) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[int, Any], _Rows] = OrderedDict()
        self._lock = threading.Lock()

    def series(self, reader: RunReader, stages: list[tuple[int, Any, str]]
               ) -> dict[str, dict[str, list[Any]]]:
        """Samples of some stage runs as columns a chart can draw.

        Args:
            reader: the store's reads (one connection for all the stages).
            stages: (stage_run_id, started, label) each.

        Returns:
            {label: {"t": [...], "records_done", "rows_per_s", "waited_input",
            "waited_output", "in_flight", "reorder_held": [...]}}, thinned to at most
            MAX_POINTS each (see _thinned: the newest always kept, peaks kept). Shared:
            callers only read them.
        """
        with self._lock:  # one reader at a time per cache: the rows are appended in place
            keys = list(dict.fromkeys((stage_run_id, started) for stage_run_id, started, _
                                      in stages))
            kept = {key: self._kept_for(key) for key in keys}
            # Each stage run's rows after the newest kept (its t): one connection for all.
            news = reader.sample_rows([(key[0], kept[key].rows[-1][0] if kept[key].rows
                                        else None) for key in keys])
            for key, new in zip(keys, news, strict=True):
                if new or kept[key].columns is None:
                    kept[key].rows.extend(new)
                    kept[key].columns = _thinned(kept[key].rows)
            return {label: kept[(stage_run_id, started)].columns or {}
                    for stage_run_id, started, label in stages}

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
