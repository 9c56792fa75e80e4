"""The one place seqline reads its environment: where runs are kept, and the run store."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_ROOT", "DEFAULT_STORE", "quiet_engines"]

DEFAULT_ROOT = Path(os.environ.get("SEQLINE_ROOT", ".seqline"))
"""The artifact root when no --root is given: $SEQLINE_ROOT, else .seqline."""

DEFAULT_STORE: str | None = os.environ.get("SEQLINE_STORE") or None
"""The run store's URL when no --store is given: $SEQLINE_STORE, else SQLite under the root."""


def quiet_engines() -> None:
    """Keep TensorFlow's C++ start-up lines (oneDNN, CUDA probing on a machine without a
    GPU) out of a run's output; a user's own TF_CPP_MIN_LOG_LEVEL wins."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
