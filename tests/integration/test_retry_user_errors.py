"""`retry_user_errors`: a flaky service costs a retry of the call, not the run; without it,
the first exception fails the block, named."""

from __future__ import annotations

import json
import logging

import pytest

import seqline
from seqline import IngestParams, PreprocessParams, Stage
from seqline.pipeline.errors import StageError
from tests.conftest import USERFNS

pytestmark = pytest.mark.integration


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(300)))
    (tmp_path / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (tmp_path / "state").mkdir()
    return tmp_path


def _pipeline(folder, retries: int) -> seqline.Pipeline:
    return seqline.Pipeline("flaky", [
        Stage("read", IngestParams(format="csv", paths=["in.csv"], block_records=100)),
        Stage("call", PreprocessParams(fn="latency:flaky", fn_kwargs={
            "state_dir": str(folder / "state"), "fails": 2}), retry_user_errors=retries),
    ], base_dir=folder)


def test_a_flaky_function_is_called_again_and_the_run_succeeds(folder, caplog):
    with caplog.at_level(logging.WARNING, logger="seqline"):
        result = _pipeline(folder, 2).run(root=folder / "root", mode="thread", cache=False)
    assert result.status == "succeeded"
    assert all(check.ok for check in result.checks)
    retried = [r.getMessage() for r in caplog.records if "calling it again" in r.getMessage()]
    assert len(retried) == 6  # two per block, three blocks
    assert ("stage 'call': the function raised on block 0 (first seq 0): ConnectionError: "
            "service unavailable (call 1); calling it again (attempt 2 of 3)") in retried
    # told by the driver as each block's result comes back: in the run's log, with its stage
    # (a worker's own log line reached the terminal only, and on Beam the log only)
    log = result.root / "runs" / result.run_id / "log.jsonl"
    logged = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(line["message"] for line in logged if "calling it again" in line["message"]) \
        == sorted(retried)
    assert {line["stage"] for line in logged if "calling it again" in line["message"]} == {
        "call"}


@pytest.mark.parametrize("runner", ["local", "beam", "ray"])
def test_calls_tried_again_are_told_on_every_runner(folder, runner):
    result = _pipeline(folder, 2).run(root=folder / "root", runner=runner, cache=False)
    assert result.status == "succeeded"
    logged = (result.root / "runs" / result.run_id / "log.jsonl").read_text()  # (as JSON)
    assert logged.count("calling it again") == 6 and "Worker: severity" not in logged


def test_without_enough_retries_the_first_exception_fails_the_block(folder):
    with pytest.raises(StageError, match=r"stage 'call' failed on block 0 \(first seq 0\): "
                                         r"ConnectionError: service unavailable \(call 2\)"):
        _pipeline(folder, 1).run(root=folder / "root", mode="thread", cache=False)


def test_retry_user_errors_is_a_stage_key_of_pipeline_files(folder):
    text = ("name: flaky\nretries: 5\nstages:\n"
            "  - {name: read, component: ingest, params: {format: csv, paths: [in.csv]}}\n"
            "  - {name: call, component: preprocess, retry_user_errors: 3, retries: 1,\n"
            "     params: {fn: 'latency:double'}}\n")
    spec = seqline.Pipeline.from_yaml_text(text, folder).spec
    assert [(s.retries, s.retry_user_errors) for s in spec.stages] == [(5, 0), (1, 3)]
    with pytest.raises(seqline.ConfigError, match=r"retry_user_errors .*(less than or equal|"
                                                  r"at most|<=) .*10"):
        seqline.Pipeline.from_yaml_text(text.replace("retry_user_errors: 3",
                                                     "retry_user_errors: 11"), folder)
