"""User functions for tests: seeded random worker latency, filter, explode, misbehaviour.

Loaded the way users' functions are (`module:function` from a folder), so every runner's
workers import them for real.
"""

import os
import signal
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEQ = "__seq__"


def _log_span(log_dir: str | None, first_seq: int, start: float) -> None:
    """Append this block's [start, end] to a per-process file: tests count overlap from them."""
    if log_dir:
        with open(os.path.join(log_dir, f"spans-{os.getpid()}.txt"), "a") as f:
            f.write(f"{first_seq} {start} {time.time()}\n")


# How long a block waits for others to start (`meet`) before it gives up and goes on alone:
# far beyond a worker's start on a loaded machine, and a sequential runner fails the test
# after one such wait instead of hanging.
MEET_TIMEOUT_S = 60.0


def _spans_logged(log_dir: str) -> int:
    total = 0
    for name in os.listdir(log_dir):
        if name.startswith("spans-"):
            with open(os.path.join(log_dir, name)) as f:
                total += sum(1 for _ in f)
    return total


def _meet(log_dir: str, first_seq: int, meet: int) -> None:
    """Say this block started, then wait until `meet` blocks have (or MEET_TIMEOUT_S passed):
    blocks that can run at once then do, however slowly the machine starts its workers."""
    with open(os.path.join(log_dir, f"started-{first_seq}"), "w"):
        pass
    deadline = time.monotonic() + MEET_TIMEOUT_S
    while time.monotonic() < deadline:
        if sum(name.startswith("started-") for name in os.listdir(log_dir)) >= meet:
            return
        time.sleep(0.005)


def skewed(batch: pa.RecordBatch, base_ms: float = 1.0, slow_every: int = 20,
           factor: float = 20.0, seed: int = 0, log_dir: str | None = None,
           meet: int = 0) -> pa.RecordBatch:
    """Sleep a random base latency; about 1 block in `slow_every` sleeps `factor`x longer.

    With `log_dir`, log the block's span; with `meet` too, first wait for `meet` blocks to
    have started (see `_meet`).
    """
    start = time.time()
    first = int(batch.column(SEQ)[0].as_py()) if batch.num_rows else -1
    if log_dir and meet:
        _meet(log_dir, first, meet)
    rng = np.random.default_rng([seed, first + 1])
    delay = base_ms * rng.uniform(0.5, 1.5)
    if rng.integers(slow_every) == 0:
        delay *= factor
    time.sleep(delay / 1000)
    out = batch.append_column("y", pc.multiply(batch.column("x"), 2))
    _log_span(log_dir, first, start)
    return out


def straggler(batch: pa.RecordBatch, seq: int = 0, slow_s: float = 2.0, base_ms: float = 5.0,
              log_dir: str | None = None, until_done: int = 0) -> pa.RecordBatch:
    """The block holding `seq` sleeps `slow_s`, every other one `base_ms`; spans logged.

    With `until_done`, the slow block instead waits until that many other blocks have logged
    their spans (or MEET_TIMEOUT_S passed): however slowly a loaded machine runs the others,
    it is slow for as long as a runner lets them go on past it.
    """
    start = time.time()
    slow = pc.any(pc.equal(batch.column(SEQ), seq)).as_py()
    if slow and log_dir and until_done:
        deadline = time.monotonic() + MEET_TIMEOUT_S
        while _spans_logged(log_dir) < until_done and time.monotonic() < deadline:
            time.sleep(0.005)
    else:
        time.sleep(slow_s if slow else base_ms / 1000)
    _log_span(log_dir, int(batch.column(SEQ)[0].as_py()), start)
    return double(batch)


def keep_even(batch: pa.RecordBatch, **kwargs) -> pa.RecordBatch:
    skewed(batch, **kwargs)
    return batch.filter(pc.equal(pc.bit_wise_and(batch.column(SEQ), 1), 0))


def explode3(batch: pa.RecordBatch, **kwargs) -> pa.RecordBatch:
    """Each row three times, in place: the parent's seq repeated."""
    skewed(batch, **kwargs)
    return batch.take(np.repeat(np.arange(batch.num_rows), 3))


def boom_at(batch: pa.RecordBatch, seq: int = 50, **kwargs) -> pa.RecordBatch:
    skewed(batch, **kwargs)
    if pc.any(pc.equal(batch.column(SEQ), seq)).as_py():
        raise ValueError(f"bad value at seq {seq}")
    return batch


def reverse(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.take(np.arange(batch.num_rows)[::-1].copy())


def drop_seq(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.drop_columns([SEQ])


def not_a_batch(batch: pa.RecordBatch) -> list:
    return batch.to_pylist()


def double(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A trivial vectorized map (the throughput benchmark's function)."""
    return batch.append_column("y", pc.multiply(batch.column("x"), 2))


def die_at(batch: pa.RecordBatch, seq: int = 150) -> pa.RecordBatch:
    """Kill this worker process outright (as a segfault would) on the block holding `seq`."""
    if seq in batch.column(SEQ).to_pylist():
        os.kill(os.getpid(), signal.SIGKILL)
    return double(batch)


def exit_once_at(batch: pa.RecordBatch, state_dir: str, seq: int = 150,
                 code: int = 0) -> pa.RecordBatch:
    """End this worker process with `code` (0: as if it were done) on the block holding `seq`,
    the first time only: `state_dir` remembers it."""
    mark = os.path.join(state_dir, f"exited-{seq}")
    if seq in batch.column(SEQ).to_pylist() and not os.path.exists(mark):
        open(mark, "w").close()
        os._exit(code)
    return double(batch)


def die_sending_once_at(batch: pa.RecordBatch, state_dir: str, seq: int = 150) -> pa.RecordBatch:
    """Die as a worker killed halfway through sending its result does (the OOM killer while a
    large block is in the pipe), the first time only: half a message in the local pool's
    result pipe, its write lock held for ever, then SIGKILL."""
    mark = os.path.join(state_dir, f"died-sending-{seq}")
    if seq in batch.column(SEQ).to_pylist() and not os.path.exists(mark):
        open(mark, "w").close()
        frame = sys._getframe()
        while frame.f_code.co_name != "_process_worker":  # concurrent.futures' worker loop
            frame = frame.f_back
        results = frame.f_locals["result_queue"]
        results._wlock.acquire()
        os.write(results._writer.fileno(), (1 << 20).to_bytes(4, "big") + b"half")
        os.kill(os.getpid(), signal.SIGKILL)
    return double(batch)


def flaky(batch: pa.RecordBatch, state_dir: str, fails: int = 2) -> pa.RecordBatch:
    """A function calling a flaky service: its first `fails` calls per block raise."""
    first = int(batch.column(SEQ)[0].as_py()) if batch.num_rows else -1
    calls = os.path.join(state_dir, f"calls-{first}-{batch.num_rows}")
    with open(calls, "a") as f:
        f.write("x")
    if os.path.getsize(calls) <= fails:
        raise ConnectionError(f"service unavailable (call {os.path.getsize(calls)})")
    return double(batch)


def stamp_pid(batch: pa.RecordBatch, column: str = "pid", base_ms: float = 1.0, seed: int = 0,
              below: int | None = None, parent: bool = False) -> pa.RecordBatch:
    """After a random latency, add the worker's pid (`parent`: its parent's) as `column`; keep
    only seq < `below`."""
    first = int(batch.column(SEQ)[0].as_py()) if batch.num_rows else -1
    time.sleep(base_ms * np.random.default_rng([seed, first + 1]).uniform(0.5, 1.5) / 1000)
    pid = os.getppid() if parent else os.getpid()
    out = batch.append_column(column, pa.array([pid] * batch.num_rows, pa.int64()))
    return out if below is None else out.filter(pc.less(out.column(SEQ), below))


def stamp_imported(batch: pa.RecordBatch, module: str = "pandas") -> pa.RecordBatch:
    """Add whether `module` was imported in this worker before this call, as `imported`."""
    imported = module in sys.modules  # first: building the column may import it
    return batch.append_column("imported", pa.array([imported] * batch.num_rows, pa.bool_()))
