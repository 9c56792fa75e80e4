"""Root cause versus cascade, from the store's rows: a stage a failure stopped (cancelled) or
kept from starting (skipped) names that stage; one a cancel stopped says so; a stage that ran,
was reused or still waits says nothing."""

from __future__ import annotations

import pytest

from seqline.orchestration.dashboard.page_data import _failure, _not_run

FAILURE = {"line": "stage 'features' failed on seq 256: ValueError", "stage": "features",
           "seq": 256, "traceback": None}


def _stage(name: str, status: str, records_in: int | None = None) -> dict[str, object]:
    return {"name": name, "status": status, "records_in": records_in}


@pytest.mark.parametrize(("stage", "run_status", "failure", "expected"), [
    (_stage("batches", "skipped", 0), "failed", FAILURE,
     {"because": "failure", "stage": "features", "verb": "not run",
      "short": "not run: features failed"}),
    (_stage("read", "cancelled", 1_024), "failed", FAILURE,  # upstream, stopped mid-way
     {"because": "failure", "stage": "features", "verb": "stopped",
      "short": "stopped: features failed"}),
    (_stage("batches", "cancelled", 0), "failed", FAILURE,  # its first block not done yet
     {"because": "failure", "stage": "features", "verb": "stopped",
      "short": "stopped: features failed"}),
    (_stage("model", "pending"), "failed", FAILURE,  # a store that never marked it skipped
     {"because": "failure", "stage": "features", "verb": "not run",
      "short": "not run: features failed"}),
    (_stage("batches", "cancelled", 512), "cancelled", None,
     {"because": "cancel", "stage": None, "verb": "stopped",
      "short": "stopped: the run was cancelled"}),
    (_stage("model", "skipped"), "cancelled", None,  # the cancel came before it started
     {"because": "cancel", "stage": None, "verb": "not run",
      "short": "not run: the run was cancelled"}),
    (_stage("features", "failed", 300), "failed", FAILURE, None),  # the root cause itself
    (_stage("read", "succeeded", 1_461), "failed", FAILURE, None),
    (_stage("read", "cached", 1_461), "failed", FAILURE, None),
    (_stage("model", "pending"), "running", None, None),  # waits its turn in a live run
    (_stage("batches", "skipped", 0), "failed", None, None),  # failed before any stage ran
])
def test_a_stage_that_did_not_run_says_whether_a_failure_or_a_cancel_stopped_it(
        stage, run_status, failure, expected):
    assert _not_run(stage, failure, run_status) == expected


@pytest.mark.parametrize(("status", "heading"), [
    ("failed", "Failed"), ("cancelled", "Cancelled"), ("interrupted", "Interrupted")])
def test_the_error_box_is_headed_as_the_run_ended(status, heading):
    """A cancelled run's box said "Failed" above "Cancelled: SIGINT"; the status decides."""
    run = {"status": status, "error": {"stage": None, "seq": None, "traceback": None,
                                       "message": "Cancelled: SIGINT"}}
    assert _failure(run) == {"line": "Cancelled: SIGINT", "stage": None, "seq": None,
                             "traceback": None, "heading": heading}
