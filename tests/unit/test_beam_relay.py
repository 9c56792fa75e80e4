"""A seqline line an SDK worker logs (a retry) reaches the terminal and the run's log in
seqline's words and with its stage, not as Beam's relayed protobuf text (a newcomer's walk of
docs/concepts/faults.md on Beam)."""

from __future__ import annotations

import logging

from seqline.orchestration.environment import BEAM_JOB_SERVICE, _beam_relay

SAID = "stage 'features': the worker running block 3 (first seq 60) died; running it again " \
       "(attempt 2 of 4)"


def _relayed(entry: str) -> logging.LogRecord:
    """As local_job_service.BeamFnLoggingServicer logs it."""
    return logging.LogRecord(BEAM_JOB_SERVICE, logging.WARNING, __file__, 1, "Worker: %s",
                             (entry,), None)


def test_a_relayed_seqline_line_is_told_in_seqline_words_with_its_stage():
    record = _relayed('severity: WARN timestamp {   seconds: 1796012503   nanos: 5718469 } '
                      'message: "stage \\\'features\\\': the worker running block 3 (first seq '
                      '60) died; running it again (attempt 2 of 4)" instruction_id: "bundle_8" '
                      'transform_id: "features/RunStage" log_location: "/p/tasks.py:88" '
                      'thread: "Thread-14"')
    assert _beam_relay(record)
    assert (record.name, record.getMessage(), record.stage) == ("seqline", SAID, "features")


def test_other_relayed_lines_stay_beams_and_the_start_up_warning_goes():
    other = _relayed('severity: WARN message: "a user print" transform_id: "features/RunStage"')
    assert _beam_relay(other) and other.getMessage().startswith("Worker: severity: WARN")
    assert not _beam_relay(_relayed('severity: WARN message: "No semi_persistent_directory '
                                    'found: Functionality that relies on it will not work."'))
