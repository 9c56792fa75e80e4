"""Order-sensitive digests of seq streams: what a stage emitted, in the order it emitted it."""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["SeqDigest", "seq_digest"]


class SeqDigest:
    """A BLAKE2b digest of a seq stream, fed block by block.

    The digest covers the int64 little-endian bytes of every seq in order, so it changes if a
    record is missing, repeated or moved, and it does not depend on how the stream was cut
    into blocks or shards.
    """

    def __init__(self) -> None:
        self._hash = hashlib.blake2b(digest_size=16)
        self.count = 0

    def update(self, seq: np.ndarray) -> None:
        self._hash.update(np.ascontiguousarray(seq, dtype="<i8").data)  # its buffer, no copy
        self.count += len(seq)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def seq_digest(seq: np.ndarray) -> str:
    digest = SeqDigest()
    digest.update(seq)
    return digest.hexdigest()
