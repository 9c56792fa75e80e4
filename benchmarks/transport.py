"""What a block's trip to a worker and back costs: through the process pool's pipes (as the
local runner sends it, Arrow IPC pickled) or as a memfd whose file descriptor crosses instead.

    python benchmarks/transport.py [--blocks 186] [--rows 16384] [--repeats 3]

Each trip: the driver sends one block (row 2's columns: id, a, b, c, name, seq; 16,384 rows,
~0.8 MB of IPC), a worker reads it and sends it back, the driver reads the answer. Printed:
wall seconds and CPU seconds of the driver and of the workers (the pool's processes are this
process's children, counted once joined), per variant. Round 8 of WHERE_TIME_GOES.md.
"""

from __future__ import annotations

import argparse
import mmap
import multiprocessing as mp
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import reduction

import numpy as np
import pyarrow as pa


class InMemfd:
    """An Arrow IPC stream in an anonymous memory file: pickled as its file descriptor
    (multiprocessing's DupFd), mapped by the receiver without a copy."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        data = memoryview(_ipc(batch))
        self.fd = os.memfd_create("block", os.MFD_CLOEXEC)
        written = 0
        while written < len(data):  # (one write, but a write may be cut short)
            written += os.write(self.fd, data[written:])
        self.size = len(data)

    def __reduce__(self):
        return (_mapped, (reduction.DupFd(self.fd), self.size))

    def __del__(self) -> None:
        os.close(self.fd)


def _mapped(dup: reduction.DupFd, size: int) -> pa.RecordBatch:
    fd = dup.detach()
    try:
        mapped = mmap.mmap(fd, size, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    return pa.ipc.open_stream(pa.py_buffer(mapped)).read_next_batch()


def _ipc_size(batch: pa.RecordBatch) -> int:
    sink = pa.MockOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.size()


def _ipc(batch: pa.RecordBatch) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def through_pipe(data: pa.Buffer) -> pa.Buffer:
    return _ipc(pa.ipc.open_stream(data).read_next_batch())


def through_memfd(batch: pa.RecordBatch) -> InMemfd:
    return InMemfd(batch)


def _block(rows: int) -> pa.RecordBatch:
    rng = np.random.default_rng(0)
    return pa.record_batch({"id": np.arange(rows), "a": rng.random(rows),
                            "b": rng.random(rows), "c": np.arange(rows),
                            "name": pa.array(["alpha"] * rows), "seq": np.arange(rows)})


def measure(variant: str, blocks: int, rows: int) -> tuple[float, float, float]:
    """(wall s, driver CPU s, workers' CPU s) of `blocks` round trips on 2 forked workers."""
    block = _block(rows)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, cpu = time.perf_counter(), time.process_time()
    with ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as pool:
        if variant == "pipe":
            done = [pool.submit(through_pipe, _ipc(block)) for _ in range(blocks)]
            back = [pa.ipc.open_stream(f.result()).read_next_batch() for f in done]
        else:
            done = [pool.submit(through_memfd, InMemfd(block)) for _ in range(blocks)]
            back = [f.result() for f in done]
    assert all(b.num_rows == rows for b in back)
    wall, driver = time.perf_counter() - start, time.process_time() - cpu
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    return wall, driver, workers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=186)
    parser.add_argument("--rows", type=int, default=16_384)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.blocks} round trips of {_ipc_size(_block(args.rows)):,} bytes, 2 workers")
    for _ in range(args.repeats):
        for variant in ("pipe", "memfd"):
            wall, driver, workers = measure(variant, args.blocks, args.rows)
            print(f"  {variant:<6} wall {wall:.3f} s  driver {driver:.3f} CPU-s  workers "
                  f"{workers:.3f} CPU-s  total {driver + workers:.3f}")


if __name__ == "__main__":
    main()
