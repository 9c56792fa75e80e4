"""The run's log: lines from log records and events, stage attribution, the cap, the terminal
unchanged, an object-store root; reading it back filtered."""

from __future__ import annotations

import json
import logging
import threading

import pytest

from seqline.orchestration.events import (
    BlocksDone,
    RunEnded,
    RunStarted,
    StageCancelled,
    StageCommitted,
    StageFailed,
    StageSkipped,
)
from seqline.orchestration.log_search import LogQuery, log_lines, search_log
from seqline.orchestration.run_log import LOG_FILE, MESSAGE_CHARS, RunLog
from seqline.pipeline.storage import folder
from seqline.pipeline.tasks import Counts


def _lines(folder):
    return [json.loads(t) for t in (folder / LOG_FILE).read_text().splitlines()]


def _in_thread(name, fn):
    thread = threading.Thread(target=fn, name=name)
    thread.start()
    thread.join()


@pytest.fixture
def run_log(tmp_path):
    log = RunLog(tmp_path, ["read", "features"])
    log.attach()
    yield log
    log.close()


def test_run_log_attributes_records_to_the_stage_whose_thread_logged(run_log, tmp_path):
    logger = logging.getLogger("seqline.test_run_log")
    _in_thread("seqline-features", lambda: logger.warning("slow block %d", 3))
    _in_thread("seqline-other", lambda: logger.warning("not a stage of this run"))
    logger.error("from the driver", extra={"stage": "read"})
    logger.warning("no stage")
    lines = _lines(tmp_path)
    assert [(line["stage"], line["message"]) for line in lines] == [
        ("features", "slow block 3"), (None, "not a stage of this run"),
        ("read", "from the driver"), (None, "no stage")]
    assert lines[0]["level"] == "WARNING" and lines[0]["logger"] == "seqline.test_run_log"
    assert lines[0]["time"].endswith("Z") and len(lines[0]["time"]) == 24  # ms, UTC


def test_run_log_attributes_a_relayed_beam_worker_line_to_its_stage(run_log, tmp_path):
    relayed = logging.getLogger("apache_beam.runners.portability.local_job_service")
    relayed.warning('Worker: severity: WARN message: "slow" instruction_id: "bundle_3" '
                    'transform_id: "features/RunStage" thread: "Thread-11"')
    relayed.warning('Worker: message: "x" transform_id: "not-a-stage/RunStage"')
    assert [line["stage"] for line in _lines(tmp_path)] == ["features", None]


def test_run_log_attributes_a_seqline_line_naming_its_stage(run_log, tmp_path):
    def retried():  # as pipeline/tasks.py says it, on a thread pool's thread
        logging.getLogger("seqline").warning(
            "stage %r: the function raised on block %d (first seq %s): %s; calling it again",
            "features", 0, 0, "ConnectionError")

    _in_thread("ThreadPoolExecutor-0_0", retried)
    logging.getLogger("userfn").warning("stage 'read': a user's line is not taken at its word")
    assert [line["stage"] for line in _lines(tmp_path)] == ["features", None]


def test_run_log_takes_a_logger_that_keeps_its_records_from_the_root_once(tmp_path):
    own = logging.getLogger("seqline.test_run_log.engine")  # as `ray.init` sets up "ray"
    own.propagate = False
    printed = logging.Handler()
    printed.emit = lambda record: None  # type: ignore[method-assign]
    own.addHandler(printed)
    log = RunLog(tmp_path, ["read"])
    try:
        log.attach()
        _in_thread("seqline-read", lambda: own.warning("an engine's warning"))
        log.detach()
        own.warning("after the run")
    finally:
        log.close()
        own.removeHandler(printed)
        own.propagate = True
    assert [(line["stage"], line["message"]) for line in _lines(tmp_path)] == [
        ("read", "an engine's warning")]
    assert log not in own.handlers and log not in logging.getLogger().handlers


def test_run_log_keeps_an_exception_traceback(run_log, tmp_path):
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("seqline.test_run_log").exception("it failed")
    [line] = _lines(tmp_path)
    assert line["level"] == "ERROR" and "ValueError: boom" in line["traceback"]


def test_run_log_tells_the_stages_story_from_events_but_not_progress(tmp_path):
    log = RunLog(tmp_path, ["read", "features"])
    log(RunStarted(run_id="r1", pipeline="p", runner="local", workers=2, window=8))
    log(BlocksDone(stage="read", counts=Counts(10, 10), blocks=1, waited_input=0,
                   waited_output=0))
    log(StageCommitted(stage="read", counts=Counts(10, 9, 1), blocks=1, seq_min=0, seq_max=9,
                       seconds=0.5, waited_input=0, waited_output=0, max_in_flight=1,
                       block_retries=0))
    log(StageFailed(stage="features", message="stage 'features' failed: ValueError: bad",
                    traceback="Traceback ...\nValueError: bad", seq=4))
    log(StageCancelled(stage="batches", seconds=0.4,
                       reason="stopped after 0.40 s: upstream `features` failed"))
    log(StageSkipped(stage="model", reason="not run: upstream `features` failed"))
    log(RunEnded(status="failed", ran=3, reused=0, not_run=1,
                 message="stage 'features' failed", traceback="Traceback ...",
                 error_stage="features"))
    lines = _lines(tmp_path)
    assert [(line["level"], line["stage"]) for line in lines] == [
        ("INFO", None), ("INFO", "read"), ("ERROR", "features"), ("WARNING", "batches"),
        ("WARNING", "model"), ("INFO", None)]
    assert "10 records in, 9 out, 1 filtered" in lines[1]["message"]
    assert lines[2]["traceback"].endswith("ValueError: bad")
    assert lines[3]["message"] == "stopped after 0.40 s: upstream `features` failed"
    # The run's end names the failed stage once: "errors only" shows the cause, not twice.
    assert "traceback" not in lines[5] and "'features'" in lines[5]["message"]
    assert lines[5]["message"].endswith("ran 3 stages, reused 0, 1 not run")
    log(RunStarted(run_id="r1", pipeline="p", runner="local", workers=2, window=8))
    assert len(_lines(tmp_path)) == 6  # RunEnded closed it


def test_run_log_says_kept_stages_as_the_terminal_does(tmp_path):
    """A resume's log ended "reused 2" where the terminal said "2 kept from the earlier
    attempt": reused means the cache."""
    log = RunLog(tmp_path, ["read", "features"])
    log(RunEnded(status="succeeded", ran=4, reused=3, kept=2))
    [line] = _lines(tmp_path)
    assert line["message"] == (
        "run succeeded; ran 4 stages, reused 1, kept 2 from the earlier attempt")


def test_run_log_failure_before_any_stage_is_an_error_line(tmp_path):
    log = RunLog(tmp_path, ["read"])
    log(RunEnded(status="failed", ran=1, reused=0, message="ray.init failed: no socket"))
    [line] = _lines(tmp_path)
    assert line["level"] == "ERROR" and "ray.init failed" in line["message"]


def test_run_log_stops_at_its_cap_keeps_errors_and_says_how_much_was_cut(tmp_path):
    log = RunLog(tmp_path, ["read"], max_bytes=2_000, error_bytes=1_000)
    log.attach()
    logger = logging.getLogger("seqline.test_run_log")
    for i in range(100):
        logger.warning("line %d %s", i, "x" * 50)
    logger.error("the failure at the end")
    log.close()
    lines = _lines(tmp_path)
    assert (tmp_path / LOG_FILE).stat().st_size < 2_000 + 1_000 + 500
    assert "reached its cap of" in lines[-3]["message"]
    assert lines[-2]["message"] == "the failure at the end"
    kept = sum(line["message"].startswith("line ") for line in lines)
    assert 10 < kept < 100
    assert lines[-1]["message"] == f"{100 - kept:,} lines past the log's cap were not kept"


def test_run_log_cuts_a_huge_message(run_log, tmp_path):
    logging.getLogger("seqline.test_run_log").warning("y" * (MESSAGE_CHARS + 5_000))
    [line] = _lines(tmp_path)
    assert line["message"].endswith("(5,000 more characters cut)")
    assert len(line["message"]) < MESSAGE_CHARS + 100


def test_run_log_leaves_the_terminal_as_python_prints_it(tmp_path, capfd):
    """With no handler configured, Python prints warnings on stderr (logging.lastResort):
    installing the run's log must not silence them, nor print them twice."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()  # as under `seqline run`: nothing configured (pytest adds its own)
    log = RunLog(tmp_path, ["read"])
    try:
        log.attach()
        logging.getLogger("seqline.test_run_log").warning("seen on the terminal")
        logging.getLogger("seqline.test_run_log").info("below lastResort's level")
        other = logging.StreamHandler()  # a handler of the user's: it prints, not lastResort
        root.addHandler(other)
        logging.getLogger("seqline.test_run_log").warning("printed by the user's handler")
        root.removeHandler(other)
    finally:
        log.close()
        root.handlers[:] = saved
    err = capfd.readouterr().err
    assert err.count("seen on the terminal") == 1
    assert err.count("printed by the user's handler") == 1
    assert "below lastResort" not in err
    assert len(_lines(tmp_path)) == 2  # the info record was never emitted (root: WARNING)
    assert log not in logging.getLogger().handlers


def test_run_log_on_an_object_store_is_put_in_place_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))
    run = folder("memory://seqline-run-log/root") / "runs" / "r1"
    log = RunLog(run, ["read"])
    log(StageSkipped(stage="read", reason="first attempt"))
    assert not (run / LOG_FILE).exists()  # no appends on an object store: written at the end
    log(RunEnded(status="cancelled", ran=1, reused=0))
    assert [line["message"] for line in log_lines(run)][0] == "first attempt"
    resumed = RunLog(run, ["read"], resume=True)  # another machine, perhaps: starts from it
    resumed(RunEnded(status="succeeded", ran=1, reused=0))
    assert [line["level"] for line in log_lines(run)] == ["WARNING", "WARNING", "INFO"]


def test_search_log_filters_by_stage_level_and_text_and_pages(tmp_path):
    rows = [{"level": "INFO", "stage": "read", "message": "started"},
            {"level": "WARNING", "stage": "read", "message": "Slow block"},
            {"level": "ERROR", "stage": "features", "message": "failed",
             "traceback": "ValueError: bad seq"},
            {"level": "INFO", "stage": None, "message": "run failed"}]
    (tmp_path / LOG_FILE).write_text("\n".join(json.dumps(r) for r in rows)
                                     + '\n{"level": "ERR')  # a last line cut by a crash

    def messages(query, **kw):
        return [r["message"] for r in search_log(tmp_path, query, **kw).rows]

    assert messages(LogQuery()) == ["started", "Slow block", "failed", "run failed"]
    assert messages(LogQuery(stage="read")) == ["started", "Slow block"]
    assert messages(LogQuery(stage="-")) == ["run failed"]
    assert messages(LogQuery(level="warning")) == ["Slow block", "failed"]
    assert messages(LogQuery(level="ERROR")) == ["failed"]
    assert messages(LogQuery(text="slow")) == ["Slow block"]
    assert messages(LogQuery(text="bad seq")) == ["failed"]  # in the traceback
    page = search_log(tmp_path, LogQuery(), page=5, page_lines=3)
    assert (page.page, page.pages, page.total, page.lines, page.errors) == (1, 2, 4, 4, 1)
    assert page.stages == ["read", "features"] and page.found
    assert not search_log(tmp_path / "none", LogQuery()).found
    with pytest.raises(ValueError, match="unknown level 'loud'"):
        LogQuery(level="loud")


def test_search_log_reads_what_run_log_wrote_quotes_and_all(tmp_path):
    """Levels and stages are read from a line's text: a message quoting JSON keys, a stage
    name with a quote, a search for a quote or a newline still find the right lines."""
    log = RunLog(tmp_path / "r", ['say "hi"', "read"])
    log.write(0, logging.INFO, "x", 'say "hi"', 'a message with "level": "ERROR" in it')
    log.write(0, logging.ERROR, "x", "read", "two\nlines \\ and a \"quote\"")
    log.close()
    run = tmp_path / "r"

    def found(query):
        return [(r["stage"], r["level"]) for r in search_log(run, query).rows]

    assert found(LogQuery(level="error")) == [("read", "ERROR")]
    assert found(LogQuery(stage='say "hi"')) == [('say "hi"', "INFO")]
    assert found(LogQuery(text='"quote"')) == [("read", "ERROR")]
    assert found(LogQuery(text="two\nlines")) == [("read", "ERROR")]
    assert found(LogQuery(text='"level": "error"')) == [('say "hi"', "INFO")]
    assert search_log(run, LogQuery()).stages == ['say "hi"', "read"]
