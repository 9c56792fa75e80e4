"""The windowed loop's own cost per block, with the head-of-line event and without it.

Usage: .venv/bin/python benchmarks/head_of_line.py [--rows 1000000] [--block 16384]
       [--repeats 31]

Both loops run the same blocks through the same reorder buffer on an engine that does no work
(each block's result is ready when it is submitted, in a shuffled order within each wait, so
results are held), publishing to what the run store's recorder does with them (LiveStage under
a lock). `before` is run_windowed as it was (an Occupancy per admitted block and per wait);
`after` is today's (an Occupancy per admitted block, a HeadOfLine per wait). What is left is
the loop's own cost: the difference is what the head of line adds per block.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections.abc import Hashable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from seqline.orchestration.events import Event, Occupancy
from seqline.orchestration.live_stage import LiveStage
from seqline.orchestration.runners.base import Runner, run_windowed
from seqline.pipeline.blocks import Block, to_blocks
from seqline.pipeline.reorder import ReorderBuffer
from seqline.pipeline.tasks import BlockResult, Counts, MapTask


class Ready:
    """A handle (hashed by identity, as the engines' handles are) whose result is ready."""

    def __init__(self, result: BlockResult) -> None:
        self.result = result
        self.attempt = 1


class ReadyEngine(Runner):
    """An engine whose every block is done as soon as it is submitted (its input as output);
    a wait returns what is pending in a seeded shuffled order."""

    name = "ready"

    def __init__(self, window: int, publish: Any) -> None:
        super().__init__(workers=window // 4 or 1, window=window, publish=publish)
        self.random = random.Random(0)

    def map_blocks(self, task: MapTask, blocks: Iterable[Block], *,
                   ordered: bool = True) -> Iterator[BlockResult]:
        return run_windowed(self, task, blocks, self, ordered=ordered)

    def submit(self, task: MapTask, block: Block) -> Hashable:
        return Ready(BlockResult(task.stage, block.index, block.first_seq, block.batch,
                                 Counts(len(block), len(block))))

    def wait(self, handles: list[Any]) -> list[tuple[Any, BlockResult]]:
        # half the window at a time, shuffled: out of order, so the buffer holds results
        chosen = self.random.sample(handles, max(1, len(handles) // 2))
        return [(h, h.result) for h in chosen]

    def cancel(self, handles: list[Any]) -> None:
        pass


def loop_before(engine: ReadyEngine, task: MapTask, blocks: Iterable[Block]
                ) -> Iterator[BlockResult]:
    """run_windowed as it was before the head of line (commit c2e4b18), for comparison."""
    buffer: ReorderBuffer[BlockResult] = ReorderBuffer(engine.window)
    source = iter(blocks)
    pending: dict[Hashable, int] = {}
    exhausted = False
    while True:
        while not exhausted and buffer.can_admit():
            block = next(source, None)
            if block is None:
                exhausted = True
                break
            pending[engine.submit(task, block)] = buffer.admit()
            engine.publish(Occupancy(stage=task.stage, in_flight=buffer.in_flight,
                                     held=buffer.held))
        if not pending:
            return
        for handle, result in engine.wait(list(pending)):
            buffer.put(pending.pop(handle), result)
        held = buffer.held
        ready = buffer.pop_ready()
        engine.publish(Occupancy(stage=task.stage, in_flight=buffer.in_flight, held=held))
        for result in ready:
            result.raise_if_failed()
            yield result


def recorder() -> Any:
    """What RunRecorder does with a coalesced event: LiveStage.follow under its lock."""
    live, lock = LiveStage(1, started=time.perf_counter()), threading.Lock()

    def follow(event: Event) -> None:
        with lock:
            live.follow(event)
    return follow


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--block", type=int, default=16_384)  # ingest's default block size
    parser.add_argument("--repeats", type=int, default=31)
    parser.add_argument("--window", type=int, default=8)  # 4 x 2 workers, the default
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    columns = {name: rng.normal(size=args.rows) for name in
               ("precipitation", "temp_max", "temp_min", "wind")}  # the demo's shape
    blocks = list(to_blocks([pa.record_batch(columns)], args.block))
    task = MapTask("work", fn=lambda batch: batch)
    timings: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.repeats):
        for name in ("before", "after"):
            engine = ReadyEngine(args.window, recorder())
            start = time.perf_counter()
            loop = loop_before(engine, task, blocks) if name == "before" \
                else engine.map_blocks(task, blocks)
            released = sum(1 for _ in loop)
            timings[name].append(time.perf_counter() - start)
            assert released == len(blocks)
    # the fastest of the repeats: on a shared machine the others measure its load too
    before, after = (min(timings[k]) for k in ("before", "after"))
    per_block = (after - before) / len(blocks) * 1e6
    print(f"{args.rows:,} rows in {len(blocks)} blocks of {args.block:,}, window {args.window}"
          f", fastest of {args.repeats}")
    print(f"  loop before: {before * 1e3:8.2f} ms  ({before / len(blocks) * 1e6:6.1f} µs/block)")
    print(f"  loop after:  {after * 1e3:8.2f} ms  ({after / len(blocks) * 1e6:6.1f} µs/block)")
    print(f"  head of line adds {per_block:.1f} µs per block, "
          f"{per_block * 1e3 / args.block:.2f} ns per record, "
          f"{(after - before) * 1e3:.2f} ms on the whole run")


if __name__ == "__main__":
    main()
