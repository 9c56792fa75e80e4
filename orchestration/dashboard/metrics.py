"""Prometheus `/metrics` read from the run store at each scrape (no run ids in labels)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from seqline.components import COMPONENTS
from seqline.orchestration.store import RunReader
from seqline.orchestration.store.statuses import GOING, StageStatus
from seqline.orchestration.store.tables import COUNTS
from seqline.orchestration.store.totals import Totals

__all__ = ["StoreCollector"]

PS = ("pipeline", "stage")


class StoreCollector(Collector):
    """Counters summed over every stage run, gauges from the running ones' newest sample.

    Series are per pipeline and stage, never per run: a label per run id would grow
    Prometheus's series without bound. Counters only grow (runs are never rewritten), so
    Grafana's `rate()` works on them.
    """

    def __init__(self, reader: RunReader) -> None:
        self.reader = reader

    def collect(self) -> Iterator[Metric]:
        totals = self.reader.totals(MODEL_COMPONENTS)
        yield from _runs(totals.runs)
        yield from _stages(totals.stages, totals.newest)
        yield from _latest_results(totals)


def _runs(rows: Sequence[dict[str, Any]]) -> Iterator[Metric]:
    ended = CounterMetricFamily("seqline_runs", "Runs that ended, by how they ended.",
                                labels=["pipeline", "status"])
    active = GaugeMetricFamily("seqline_runs_active", "Runs queued or running now.",
                               labels=["pipeline", "status"])
    last = GaugeMetricFamily("seqline_run_last_finished_timestamp_seconds",
                             "When the pipeline's newest run in each status ended.",
                             labels=["pipeline", "status"])
    counts: dict[tuple[str, str], int] = defaultdict(int)
    newest: dict[tuple[str, str], float] = {}
    for r in rows:  # statuses as shown: a run whose driver is gone is interrupted
        key = (r["pipeline"], r["status"])
        counts[key] += 1
        if r["finished"] is not None and r["status"] not in GOING:
            newest[key] = max(newest.get(key, 0.0), r["finished"].timestamp())
    for (pipeline, status), n in sorted(counts.items()):
        (active if status in GOING else ended).add_metric([pipeline, status], n)
    for key, t in sorted(newest.items()):
        last.add_metric(list(key), t)
    yield from (ended, active, last)


def _stages(rows: Sequence[dict[str, Any]], newest: dict[int, dict[str, Any]]
            ) -> Iterator[Metric]:
    records = CounterMetricFamily("seqline_records", "Records through a stage, by outcome "
                                  "(in, out, filtered, exploded, dead_lettered).",
                                  labels=[*PS, "outcome"])
    seconds = SummaryMetricFamily("seqline_stage_seconds", "Wall time of stage runs that "
                                  "ended (succeeded, failed or cancelled).", labels=list(PS))
    waits = CounterMetricFamily("seqline_wait_seconds", "Seconds stages waited on their input "
                                "or for room downstream.", labels=[*PS, "side"])
    flight = GaugeMetricFamily("seqline_blocks_in_flight", "Blocks a running stage has in "
                               "flight on its workers.", labels=list(PS))
    held = GaugeMetricFamily("seqline_reorder_buffer_blocks", "Results a running stage's "
                             "reorder buffer holds for an earlier block.", labels=list(PS))
    rate = GaugeMetricFamily("seqline_stage_rows_per_second", "A running stage's throughput "
                             "over its last second.", labels=list(PS))
    counted: dict[tuple[str, str, str], float] = defaultdict(float)  # (pipeline, stage, outcome)
    waited: dict[tuple[str, str, str], float] = defaultdict(float)  # (pipeline, stage, side)
    ended: dict[tuple[str, str], int] = defaultdict(int)
    seconds_sum: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        key = (r["pipeline"], r["stage"])
        s = newest.get(r["id"])
        if r["status"] == StageStatus.running:  # its counts come when it ends; till then,
            counted[(*key, "in")] += s["records_done"] if s else 0  # its last sample
            waited[(*key, "input")] += (s["waited_input"] or 0) if s else 0
            waited[(*key, "output")] += (s["waited_output"] or 0) if s else 0
            if s is not None:
                flight.add_metric(list(key), s["in_flight"] or 0)
                held.add_metric(list(key), s["reorder_held"] or 0)
                rate.add_metric(list(key), s["rows_per_s"] or 0.0)
            continue
        for column in COUNTS:
            counted[(*key, column.removeprefix("records_"))] += r[column] or 0
        waited[(*key, "input")] += r["waited_input"] or 0
        waited[(*key, "output")] += r["waited_output"] or 0
        ended[key] += 1
        seconds_sum[key] += r["seconds"] or 0.0
    for outcome_key, value in sorted(counted.items()):
        records.add_metric(list(outcome_key), value)
    for side_key, value in sorted(waited.items()):
        waits.add_metric(list(side_key), value)
    for key, n in sorted(ended.items()):
        seconds.add_metric(list(key), count_value=n, sum_value=seconds_sum[key])
    yield from (records, seconds, waits, flight, held, rate)


# The components whose stage runs hold a model's quality: training epochs or an evaluation.
MODEL_COMPONENTS = tuple(name for name, c in COMPONENTS.items()
                         if c.writes in ("model", "evaluation"))


def _latest_results(totals: Totals) -> list[Metric]:
    """Each pipeline's newest evaluation and training epoch: what a model-quality panel plots."""
    value = GaugeMetricFamily("seqline_eval_metric", "The newest evaluation's overall metrics.",
                              labels=[*PS, "metric"])
    blessed = GaugeMetricFamily("seqline_model_blessed", "1 if the newest evaluation blessed "
                                "its model, else 0.", labels=list(PS))
    trained = GaugeMetricFamily("seqline_train_epoch_metric", "The newest training epoch's "
                                "metrics (loss, …).", labels=[*PS, "metric"])
    by_id = {r["id"]: r for r in totals.models}
    for m in totals.model_metrics:
        r = by_id[m["stage_run_id"]]
        value.add_metric([r["pipeline"], r["stage"], m["metric"]], m["value"])
    for r in totals.models:
        if r["blessed"] is not None:
            blessed.add_metric([r["pipeline"], r["stage"]], 1.0 if r["blessed"] else 0.0)
    for e in totals.model_epochs:
        r = by_id[e["stage_run_id"]]
        for name, number in sorted(e["metrics"].items()):
            if isinstance(number, int | float):
                trained.add_metric([r["pipeline"], r["stage"], name], float(number))
    return [value, blessed, trained]
