"""What a run page and a stage page show, as plain dicts (the HTML and the JSON share them)."""

from __future__ import annotations

import re
from typing import Any

from starlette.exceptions import HTTPException

from seqline.components import COMPONENTS
from seqline.orchestration.dashboard import files
from seqline.orchestration.dashboard.accounting import accounting
from seqline.orchestration.dashboard.batch_order import batch_order
from seqline.orchestration.dashboard.context import Dashboard
from seqline.orchestration.dashboard.graph import graph
from seqline.orchestration.dashboard.head_of_line import blocked, head_of_line
from seqline.orchestration.dashboard.profile_data import profile_view
from seqline.orchestration.dashboard.series import ended_at
from seqline.orchestration.dashboard.timeline import NARROW, RAN, bottleneck, timeline
from seqline.orchestration.plan import KEPT
from seqline.orchestration.store.statuses import ENDED
from seqline.orchestration.verify import breaks_contract

__all__ = ["run_view", "stage_view"]

# Where it happened: ingest's errors say "… in data/in.csv, line 3, seq 1 …", a user
# function's "… (at features.py, line 7)".
_PLACE = re.compile(r"\b(?:in|at) (?P<file>\S+?), line (?P<line>\d+)")


def run_view(dash: Dashboard, run_id: str, version: int | None = None) -> dict[str, Any]:
    """The run, its samples, the timeline, the bottleneck, verify's verdict, the error's place.

    Args:
        dash: the server's state.
        run_id: the run (from the address: looked up first).
        version: the run's version (Dashboard.version): reads shared with the other views
            at that version; None reads now.

    Raises:
        HTTPException: 404 when the store has no such run.
    """
    run = dash.run_at(run_id, version)
    samples = dash.samples_at(run, version)
    failure = _failure(run)
    for stage in run["stages"]:
        _add_figures(stage, samples.get(stage["name"]) or {}, failure, run["status"])
    place = _PLACE.search(failure["line"]) if failure else None
    return {
        "run": run,
        "samples": samples,
        "failure": failure,
        "ran": _ran(run),
        "graph": graph(run["stages"]),
        "timeline": timeline(run, samples),
        "timeline_narrow": timeline(run, samples, NARROW),  # a phone's
        "bottleneck": bottleneck(run["stages"]),
        "verify": _broken(files.verify_of(dash.root, run_id)),
        "error_place": place.groupdict() if place else None,
        "ended": run["status"] in ENDED,
        "previous": dash.reader.previous_run(run_id),
    }


def stage_view(dash: Dashboard, run_id: str, name: str, *, shards: int = 0, dead: int = 0,
               epoch: int = 0, batches: int = 0, version: int | None = None) -> dict[str, Any]:
    """One stage of a run: samples, shards and dead letters (paged), training, evaluation,
    and its history across the pipeline's runs (`version` as for run_view).

    Raises:
        HTTPException: 404 when the store has no such run or stage (or its files would lie
            outside the root).
    """
    run = dash.run_at(run_id, version)
    stage = next((s for s in run["stages"] if s["name"] == name), None)
    if stage is None:
        raise HTTPException(404, "no such stage in this run")
    found = dash.series([stage]) if version is None else dash.samples_at(run, version)
    columns = found.get(name) or {}
    failure = _failure(run)
    _add_figures(stage, columns, failure, run["status"])
    manifest = files.manifest_of(dash.root, run_id, name)
    dead_total = stage["dead_lettered"] or ((manifest or {}).get("dead_letters") or {}).get(
        "count", 0)
    letters = files.dead_letters_page(dash.root, run_id, name, dead_total, dead, manifest)
    if letters is None:
        raise HTTPException(404, "that stage's files are outside the artifact root")
    return {
        "run": run,
        "stage": stage,
        "samples": {name: columns},
        "failure": failure if failure and failure["stage"] == name else None,
        "committed": manifest is not None,
        "shards": files.shards_page(manifest, shards),
        "dead_letters": letters,
        "training": _training(stage, manifest, epoch, batches),
        "evaluation": _evaluation(stage, manifest),
        "history": dash.reader.history(run["pipeline"], name),
        "ended": run["status"] in ENDED,
        "profile": profile_view(dash.reader, dash.root, run_id, name, manifest),
        "head_of_line": head_of_line(stage, columns),
        "verified": _verified(dash, run_id, name),
    }


def _verified(dash: Dashboard, run_id: str, name: str) -> dict[str, Any] | None:
    """The stage's entry in verify's verdict (its problems and the gap finder's intervals);
    None when the run was not verified or the verdict has no such stage."""
    found = files.verify_of(dash.root, run_id) or {}
    return _broken(next((c for c in found.get("stages") or [] if c.get("stage") == name),
                        None))


def _broken(verdict: dict[str, Any] | None) -> dict[str, Any] | None:
    """A verdict (a run's, or a stage's entry), with `broken`: whether any problem is one of
    order (a planned stage without committed output breaks nothing: the terminal says
    "what it committed holds the contract")."""
    if verdict is None:
        return None
    return {**verdict, "broken": breaks_contract(
        p for c in verdict.get("stages") or [verdict] for p in c.get("problems") or [])}


def _failure(run: dict[str, Any]) -> dict[str, Any] | None:
    """The run's failure: its one line (as the terminal printed it), the failing stage, the
    seq, and the traceback (None when the store has none: before revision 5, or none kept).

    Example: error_message "stage 'features' failed on seq 256: ValueError: no humidity"
    -> {"line": that, "stage": "features", "seq": 256, "traceback": "Traceback …"}.
    """
    error = run.get("error")
    if not error or not (error.get("message") or error.get("stage")):
        return None
    lines = (error.get("message") or "").strip().splitlines()
    # A store older than revision 5 kept the traceback under the line, in the message.
    folded = error.get("traceback") or "\n".join(lines[1:]).strip() or None
    # headed as every other surface names the run's end (a cancel is not a failure)
    heading = {"cancelled": "Cancelled", "interrupted": "Interrupted"}.get(
        str(run.get("status")), "Failed")
    return {"line": lines[0] if lines else "failed", "stage": error.get("stage"),
            "seq": error.get("seq"), "traceback": folded, "heading": heading}


def _add_figures(stage: dict[str, Any], columns: dict[str, list[Any]],
                 failure: dict[str, Any] | None, run_status: str) -> None:
    """What a stage's rows show beside its counts, added to its dict (run_view's copy):

    `live`: its newest sample; `shown`: its records in and waits as its row shows them (a
    running stage's newest sample's; a finished one's row's, None where it has none);
    `t1`: its end as its table counts it (series.ended_at);
    `rows_per_s`: a running stage's sampled rate, a finished one's records in over its
    seconds (as the terminal's table), None for a stage that did not run now;
    `peak_in_flight`, `peak_held`: the most blocks in flight and held by its reorder buffer
    (the chart's peaks, and the row's maximum);
    `why`: the store's reason (a reused stage without one: the run it came from);
    `error_shown`: its own error, None when it is a copy of the run's failure line (shown
    once, at the top); `not_run`: why it did not run (to the end), see _not_run;
    `blocked`: a running stage's head of line now, see head_of_line.blocked;
    `accounting`: whether its counts add up, see accounting.accounting.
    """
    stage["live"] = live = {k: v[-1] for k, v in columns.items() if v}  # the newest sample
    running = stage["status"] == "running"
    stage["shown"] = {"records_in": live.get("records_done") if running else stage["records_in"],
                      **{k: live.get(k) if running else stage[k]
                         for k in ("waited_input", "waited_output")}}
    stage["t1"] = ended_at(stage)  # the timeline's bar and the chart's span: its seconds
    rate = None
    if stage["status"] == "running":
        rate = stage["live"].get("rows_per_s")
    elif stage["status"] in RAN and stage["seconds"] and stage["records_in"] is not None:
        rate = stage["records_in"] / stage["seconds"]
    stage["rows_per_s"] = rate
    stage["peak_in_flight"] = _peak(columns, "in_flight", stage.get("max_in_flight"))
    stage["peak_held"] = _peak(columns, "reorder_held")
    stage["why"] = stage.get("reason") or (
        f"reused from run {stage['cached_from']}" if stage.get("cached_from") else None)
    error = (stage.get("error") or "").strip()
    first = error.splitlines()[0] if error else ""
    copied = failure is not None and (first.startswith(failure["line"])
                                      or failure["line"].startswith(first))
    stage["error_shown"] = error if error and not copied else None
    stage["not_run"] = _not_run(stage, failure, run_status)
    stage["blocked"] = blocked(stage)
    stage["accounting"] = accounting(stage)


def _not_run(stage: dict[str, Any], failure: dict[str, Any] | None,
             run_status: str) -> dict[str, Any] | None:
    """Why a stage did not run, or not to the end, as the store tells it: the root cause
    versus its cascade. In a failed run every stage cancelled or skipped was stopped by the
    failure (the executor stops stages for a failure or a cancel only); the store's error
    names the stage. A cancelled stage was stopped at work ("stopped"), a skipped one did
    nothing ("not run").

    Example: a skipped stage, in a run whose failure is in `features` -> {"because":
    "failure", "stage": "features", "verb": "not run", "short": "not run: features
    failed"}; a cancelled one says "stopped: features failed"; in a cancelled run,
    {"because": "cancel", …, "short": "stopped: the run was cancelled"}.
    None for a stage that ran, was reused, or waits in a live run.
    """
    status = stage["status"]
    if status not in ("skipped", "cancelled") and not (status == "pending"
                                                       and run_status in ENDED):
        return None
    verb = "stopped" if status == "cancelled" else "not run"
    if run_status == "cancelled":
        return {"because": "cancel", "stage": None, "verb": verb,
                "short": f"{verb}: the run was cancelled"}
    cause = failure["stage"] if failure else None
    if cause and cause != stage["name"]:
        return {"because": "failure", "stage": cause, "verb": verb,
                "short": f"{verb}: {cause} failed"}
    return None


def _peak(columns: dict[str, list[Any]], name: str, recorded: int | None = None) -> int | None:
    """The largest of a sampled column and a recorded maximum; None when all are 0 or none."""
    return max([recorded or 0, *(v for v in columns.get(name) or [] if v is not None)]) or None


def _ran(run: dict[str, Any]) -> dict[str, Any]:
    """The run line's counts: how many stages ran now, were reused (from which runs), kept
    from a resumed run's earlier attempt, or did not run, as the terminal says them, e.g.
    "ran 2 of 6 stages on local; 4 reused from run first"."""
    stages = run["stages"]
    reused = [s for s in stages if s["status"] == "cached"]
    kept = sum(s["reason"] == KEPT for s in stages)  # (its row is the earlier attempt's)
    return {"ran": sum(s["status"] in RAN for s in stages) - kept, "of": len(stages),
            "reused": len(reused), "kept": kept,
            "reused_from": sorted({s["cached_from"] for s in reused if s.get("cached_from")}),
            "not_run": sum(s["status"] == "skipped" for s in stages)}


def _training(stage: dict[str, Any], manifest: dict[str, Any] | None, epoch: int,
              page: int) -> dict[str, Any] | None:
    """Epochs (from the store), the input-wait share, and the order audit (the manifest)."""
    if _writes(stage) != "model":
        return None
    epochs = stage["epochs"]
    seconds = sum(e["seconds"] or 0 for e in epochs)
    waited = sum(e["input_wait_seconds"] or 0 for e in epochs)
    audit = [{key: e.get(key) for key in ("epoch", "examples", "seq_digest", "input_seconds")}
             | {"batches": len(e.get("batches") or [])}
             for e in (manifest or {}).get("epochs") or []]
    chosen = next((e for e in (manifest or {}).get("epochs") or [] if e.get("epoch") == epoch),
                  None)
    rows = (chosen or {}).get("batches") or []
    size = files.PAGE_SIZE
    return {
        "epochs": epochs,
        "metric_names": sorted({m for e in epochs for m in e["metrics"]}),
        "input_wait_share": waited / seconds if seconds else None,
        "seconds": seconds, "input_wait_seconds": waited,  # the epochs' totals
        "audit": audit,
        "epoch": epoch,
        "batches": {"rows": [{"index": page * size + i, **b}
                             for i, b in enumerate(rows[page * size:(page + 1) * size])],
                    "page": page, "pages": max(1, -(-len(rows) // size)), "total": len(rows),
                    "picture": batch_order(rows)},
    }


def _evaluation(stage: dict[str, Any], manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """Metrics overall and per slice, against the thresholds and the baseline."""
    if stage["evaluation"] is None:
        return None
    found = manifest or {}
    return {**stage["evaluation"], "thresholds": found.get("thresholds") or {},
            "baseline": found.get("baseline"), "reasons": found.get("reasons") or [],
            "examples": found.get("examples")}


def _writes(stage: dict[str, Any]) -> str | None:
    """What the stage's component writes (a model, an evaluation, records, ...)."""
    component = COMPONENTS.get(stage["component"])
    return component.writes if component else None

