"""A store whose write lock is held past the busy timeout: the error says who held it (a
thread of this process, or another process), and a long write is said in the log."""

from __future__ import annotations

import gc
import logging
import re
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import OperationalError

from seqline.orchestration.store import RunStore
from seqline.orchestration.store import engine as store_engine
from seqline.orchestration.store.engine import make_engine, writing
from seqline.orchestration.store.errors import database_words


def _impatient(url: str):
    """An engine on the store that waits 0.2 s for the write lock, not 30."""
    engine = make_engine(url)
    event.listen(engine, "connect",  # after make_engine's own listener: its timeout wins
                 lambda dbapi, _record: dbapi.execute("PRAGMA busy_timeout = 200"))
    return engine


def _locked(url: str) -> OperationalError:
    with pytest.raises(OperationalError) as caught, writing(_impatient(url)) as conn:
        conn.execute(text("SELECT 1"))
    return caught.value


def test_a_lock_held_by_a_thread_of_this_process_names_the_thread_and_where_it_is(tmp_path,
                                                                                caplog):
    store = RunStore.open(tmp_path)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with writing(store.engine):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold, name="seqline-features")
    holder.start()
    try:
        assert holding.wait(10)
        words = database_words(_locked(store.url))
    finally:
        release.set()
        holder.join()
    assert re.fullmatch(r"database is locked \(its write lock held in this process by thread "
                        r"seqline-features for \d+ s\)", words), words
    assert store_engine.lock_holders() == []  # released, and forgotten
    assert re.search(r"thread seqline-features has held the run store's write lock for \d+ s, "
                     r"at:\n.*in hold\n\s+release\.wait\(10\)", caplog.text, re.S), caplog.text


def test_a_lock_held_by_another_process_says_so(tmp_path):
    store = RunStore.open(tmp_path)
    db = store.url.removeprefix("sqlite:///")
    other = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], "
         "isolation_level=None); c.execute('BEGIN IMMEDIATE'); print('held', flush=True); "
         "time.sleep(30)", db], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline() == "held\n"
        words = database_words(_locked(store.url))
    finally:
        other.kill()
        other.wait()
    assert words == "database is locked (another process held its write lock for over 30 s)"


def test_a_write_held_for_long_is_said_in_the_log(tmp_path, monkeypatch, caplog):
    store = RunStore.open(tmp_path)
    monkeypatch.setattr(store_engine, "SLOW_WRITE_S", 0.05)
    with caplog.at_level(logging.WARNING), writing(store.engine):
        time.sleep(0.1)
    assert re.search(r"thread MainThread held its write lock for 0\.\d s; other writers wait "
                     r"for it \(at most 30 s\)", caplog.text), caplog.text


class _Garbage:
    """A cycle whose finalizer notes whether it ran while this thread held the write lock."""

    ran_inside: list[bool] = []

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        _Garbage.ran_inside.append(bool(store_engine.lock_holders()))


def test_no_garbage_is_collected_while_the_write_lock_is_held(tmp_path):
    # A finalizer that blocks inside a write transaction would hold every other writer off.
    store = RunStore.open(tmp_path)
    threshold = gc.get_threshold()
    gc.set_threshold(1)  # collect at almost every allocation
    try:
        with writing(store.engine) as conn:
            for _ in range(1000):
                _Garbage()
            conn.execute(text("SELECT 1"))
            assert not gc.isenabled()
        assert gc.isenabled()
        for _ in range(10):
            _Garbage()
        gc.collect()
    finally:
        gc.set_threshold(*threshold)
    assert _Garbage.ran_inside and not any(_Garbage.ran_inside)
