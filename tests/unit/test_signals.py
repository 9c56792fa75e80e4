"""Ctrl-C and SIGTERM cancel a run, even when Python drops the exception a signal raised.

Python raises a signal's exception in the main thread wherever it is; inside a finalizer (a
weakref callback of SQLAlchemy's, run by the garbage collector) it is printed and dropped.
A run driven from a script went on to its end after a SIGINT so dropped (1 run in 8 under
load), and a `kill -INT` to such a driver was lost.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from seqline.orchestration.line import AssemblyLine
from seqline.orchestration.processes import raise_if_cancelled, signals_cancel
from seqline.pipeline.errors import Cancelled

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals reach the main thread only")


@pytest.fixture(autouse=True)
def python_handles_ctrl_c():
    """Ctrl-C as in a process of one's own: pytest-xdist's workers handle it otherwise."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class SignalledWhileCollected:
    """An object whose finalizer receives the signal: the handler runs inside `__del__`."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        os.kill(os.getpid(), self.signum)
        time.sleep(0.05)  # the handler runs here, and its exception is dropped


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_cancel_dropped_in_a_finalizer_still_stops_the_line(tmp_path, signum):
    line = AssemblyLine(tmp_path)
    line.add_stage("work")

    def work():
        line.stop.wait(30)  # a stage that waits for its engine until the line stops
        return tmp_path

    line.start("work", work)
    dropped: list[object] = []
    previous = sys.unraisablehook
    sys.unraisablehook = dropped.append
    try:
        with pytest.raises(Cancelled) as raised, signals_cancel():
            SignalledWhileCollected(signum)  # collected at once: the cancel is dropped
            started = time.monotonic()
            line.join(["work"])
    finally:
        sys.unraisablehook = previous
    assert raised.value.signal == signal.Signals(signum).name
    assert time.monotonic() - started < 5  # not the stage's 30 s
    assert line.stop.is_set()
    assert dropped == []  # the cancel's "Exception ignored" is not printed: it was not lost
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    raise_if_cancelled()  # over with its run: the next run is not stopped by it


def test_a_second_ctrl_c_is_a_plain_keyboard_interrupt(tmp_path):
    with pytest.raises(KeyboardInterrupt) as raised, signals_cancel():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except Cancelled:
            os.kill(os.getpid(), signal.SIGINT)  # during the cleanup: a user insists
            time.sleep(1)
    assert not isinstance(raised.value, Cancelled)
