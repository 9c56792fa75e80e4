"""train's order audit: per epoch, what the model was fed (recorded), and `verify`'s check of it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from seqline.components.batching.examples import Batches, load_batches
from seqline.components.batching.plan import plan_of
from seqline.pipeline.artifacts import read_manifest
from seqline.pipeline.audit import SeqDigest, seq_digest
from seqline.pipeline.errors import SeqlineError

__all__ = ["EpochAudit", "verify_audit"]


class EpochAudit:
    """Per epoch: a digest of the seq the model was fed, in order, and each batch's seq range.

    The batches are recorded as the input pipeline hands them over; tf.data keeps their order
    and an epoch consumes every batch, so an epoch that ends has been fed exactly this.

    It also measures how long the training steps waited for input: step k waited if its batch
    was handed over after the step asked for it (`step_begins`), by the difference.
    """

    def __init__(self, replicas: int, worker: int | None = None,
                 progress: Callable[[int, float | None, int], None] | None = None) -> None:
        self.replicas = replicas
        self.worker = worker  # on several workers: this one's rank; it feeds slice `worker`
        # told the examples fed so far, over all epochs (live rows/s), the steps' input waits
        # so far as each epoch ends, and the examples taken (each epoch takes the same again)
        self.progress = progress
        self.fed = 0
        self.taken = 0  # the largest epoch's examples so far
        self.waited = 0.0
        self.epoch = 0
        self.epochs: list[dict[str, Any]] = []
        self._reset()

    def _reset(self) -> None:
        self.digest, self.input_seconds = SeqDigest(), 0.0
        self.worker_digest = SeqDigest()  # the slices this worker fed, on several workers
        self.batches: list[dict[str, Any]] = []  # per batch: first, last and replica seq
        self.handed: list[float] = []  # when each batch was handed over (perf_counter)
        self.asked: list[float] = []  # when each step asked for its batch
        self.pulled: float | None = None  # when the input pipeline was first pulled

    def begin(self, epoch: int) -> None:
        self.epoch = epoch
        self._reset()
        self.started, self.wall_start = time.perf_counter(), time.time()

    def record(self, seq: np.ndarray, seconds: float) -> None:
        self.digest.update(seq)
        slices = np.array_split(seq, self.replicas)  # MirroredStrategy's contiguous slices
        batch = {"first": int(seq[0]), "last": int(seq[-1]),
                 "replicas": [[int(s[0]), int(s[-1])] for s in slices if len(s)]}
        if self.worker is not None:
            own = slices[self.worker]
            self.worker_digest.update(own)
            batch["worker"] = [int(own[0]), int(own[-1])] if len(own) else []
        self.batches.append(batch)
        self.input_seconds += seconds
        self.handed.append(time.perf_counter())
        self.fed += len(seq)  # once per batch: cheap
        self.taken = max(self.taken, self.digest.count)
        if self.progress is not None:
            self.progress(self.fed, None, self.taken)

    def step_begins(self) -> None:
        self.asked.append(time.perf_counter())

    def end(self, epoch: int, logs: dict[str, float]) -> None:
        """The epoch's record: its seq digest, batches, time and input wait, and metrics."""
        seconds = time.perf_counter() - self.started
        asked = list(self.asked)
        if asked and self.pulled:
            # The first step asks for data only after Keras has traced it (seconds, in the
            # first epoch); the input pipeline is first pulled then, not at the step's start.
            asked[0] = max(asked[0], self.pulled)
        waited = sum(max(0.0, h - a) for h, a in zip(self.handed, asked, strict=False))
        self.epochs.append({
            "epoch": epoch, "started": self.wall_start, "seq_digest": self.digest.hexdigest(),
            "examples": self.digest.count,
            **({} if self.worker is None else {"worker_digest": self.worker_digest.hexdigest()}),
            "batches": self.batches, "seconds": round(seconds, 4),
            "input_seconds": round(self.input_seconds, 4),
            "input_wait_seconds": round(waited, 4),
            "metrics": {k: float(v) for k, v in (logs or {}).items()},
        })
        self.waited += round(waited, 4)  # as the stage's total sums them
        if self.progress is not None:
            self.progress(self.fed, self.waited, self.taken)


def verify_audit(run: Path, manifest: dict[str, Any], problems: list[str]) -> None:
    """`seqline verify`: every epoch's digest, recomputed from the plan and the stored records.

    The examples of each epoch are derived again from the batching plan and the records (seq
    read from the shards), so an epoch that does not match what the model was fed shows here.
    """
    try:
        plan = plan_of(read_manifest(run / manifest["input"]))
        batches = load_batches(run, plan, manifest.get("stage", "train"))
    except SeqlineError as exc:
        problems.append(f"audit: cannot rebuild the batches: {exc}")
        return
    for epoch in manifest["epochs"]:
        if seq_digest(batches.example_seq("train", epoch["epoch"])) != epoch["seq_digest"]:
            problems.append(f"audit: epoch {epoch['epoch']} fed the model a seq stream "
                            "that differs from the train split recomputed from the records")
        elif "worker_digests" in epoch:
            _verify_slices(batches, epoch, problems)


def _verify_slices(batches: Batches, epoch: dict[str, Any], problems: list[str]) -> None:
    """Each worker's slices, recomputed: contiguous parts of every global batch, in order."""
    workers = len(epoch["worker_digests"])
    seqs = [np.array_split(seq, workers) for _, _, seq in batches.batches("train", epoch["epoch"])]
    claimed = [b["workers"] for b in epoch["batches"]]
    derived = [[[int(s[0]), int(s[-1])] if len(s) else [] for s in parts] for parts in seqs]
    if claimed != derived:
        bad = next((i for i, (c, d) in enumerate(zip(claimed, derived, strict=False))
                    if c != d), min(len(claimed), len(derived)))
        problems.append(f"audit: epoch {epoch['epoch']} batch {bad}: the workers' slices "
                        "differ from the batch recomputed from the records")
    for worker, digest in enumerate(epoch["worker_digests"]):
        own = np.concatenate([parts[worker] for parts in seqs]) if seqs else np.empty(0)
        if seq_digest(own.astype(np.int64)) != digest:
            problems.append(f"audit: epoch {epoch['epoch']}: worker {worker} was fed a seq "
                            "stream that differs from its slices of the recomputed batches")
