"""Dead letters: records a stage could not take, kept with why, and the budget that allows them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import IO, Any

from pydantic import BaseModel, Field

from seqline.pipeline.errors import StageError
from seqline.pipeline.params import PARAMS_CONFIG
from seqline.pipeline.storage import Folder, storage_of

__all__ = ["DEAD_LETTERS", "DeadLetter", "DeadLetterFile", "ErrorBudget", "read_dead_letters"]

DEAD_LETTERS = "dead_letters.jsonl"


@dataclass(frozen=True)
class DeadLetter:
    """One record a stage rejected: its seq, where it came from, why, and its raw text."""

    seq: int
    reason: str
    file: str | None = None
    line: int | None = None  # 1-based line in `file`, when the format has lines
    raw: str | None = None  # the record as the source had it (a CSV line, a JSON line, a row)

    def where(self) -> str:
        place = f"{self.file}, line {self.line}, " if self.file and self.line else \
            f"{self.file}, " if self.file else ""
        return f"{place}seq {self.seq}"


class ErrorBudget(BaseModel):
    """How many bad records a stage may set aside instead of failing the run.

    With no budget (the default) the first bad record fails the run, naming it. With one, bad
    records go to the stage's dead letters, and the stage fails at its end if more than
    `max_fraction` of its input was bad, or as soon as more than `max_records` were. Each
    limit applies when given; `errors: {}` gives none: the stage reads on to its end, counts
    every bad record and then fails, naming the first (a failed stage commits nothing).

    Example: `errors: {max_fraction: 0.01}` lets 10 bad rows of 1,000 through, not 11;
    `errors: {max_records: 3}` lets 3 through, whatever the input's size.
    """

    model_config = PARAMS_CONFIG

    max_fraction: float | None = Field(None, ge=0, le=1, description=(
        "The share of the stage's input that may be bad, 0 to 1."))
    max_records: int | None = Field(None, ge=0, description=(
        "Fail as soon as more than this many records were bad."))

    def check_running(self, stage: str, dead: int, first: DeadLetter | None) -> None:
        if self.max_records is not None and dead > self.max_records:
            raise self._exceeded(stage, f"{dead:,} bad records so far, more than max_records "
                                        f"{self.max_records:,}", first)

    def check_final(self, stage: str, dead: int, records_in: int,
                    first: DeadLetter | None) -> None:
        if self.max_fraction is None and self.max_records is not None:
            return  # judged as the records came (check_running)
        fraction = self.max_fraction or 0.0
        if dead > fraction * records_in:
            limit = f"more than max_fraction {fraction:g}" if self.max_fraction is not None \
                else "and `errors: {}` allows none (give it max_fraction or max_records)"
            raise self._exceeded(
                stage, f"{dead:,} of {records_in:,} records were bad "
                       f"({dead / max(records_in, 1):.2%}), {limit}", first)

    @staticmethod
    def _exceeded(stage: str, what: str, first: DeadLetter | None) -> StageError:
        example = ""
        if first is not None:
            ended = first.reason.endswith((".", "!", "?"))
            example = f" The first: {first.where()}: {first.reason}{'' if ended else '.'}"
        return StageError(
            f"stage {stage!r} exceeded its error budget: {what}.{example} Fix the input, or "
            "raise `errors:` in the pipeline file if these records may be set aside.",
            stage=stage, seq=first.seq if first else None)


class DeadLetterFile:
    """A stage's dead letters as JSON Lines, appended as they arrive, counted and hashed.

    The file is named for this attempt where attempts share the stage's folder (an object
    store: `dead_letters-<hex>.jsonl`, which the manifest then names). Locally readers see the
    letters as they arrive; an object store, which has no appends, gets them whole at close.
    """

    def __init__(self, folder: Folder) -> None:
        self.folder = folder
        self.storage = storage_of(folder)
        self.name = self.storage.attempt_name(DEAD_LETTERS)
        self.count = 0
        self.first: DeadLetter | None = None
        self._sha = hashlib.sha256()
        self._file: IO[str] | None = None

    def add(self, letters: Iterable[DeadLetter]) -> None:
        for letter in letters:
            if self._file is None:
                # closed in close()
                self._file = self.storage.open(self.folder / self.name, "w")
            line = json.dumps(asdict(letter), sort_keys=True) + "\n"
            self._file.write(line)
            self._sha.update(line.encode())
            self.first = self.first or letter
            self.count += 1

    def close(self) -> dict[str, Any] | None:
        """Flush the file; return its manifest entry (None when nothing was set aside)."""
        if self._file is None:
            return None
        self._file.close()
        return {"path": self.name, "count": self.count, "sha256": self._sha.hexdigest()}


def read_dead_letters(stage_dir: Folder, manifest: dict[str, Any] | None = None
                      ) -> list[DeadLetter]:
    """A committed stage's dead letters, in the order they were set aside (seq order).

    `manifest` names the file (its name is per attempt on an object store); without it the
    local name is assumed.
    """
    entry = (manifest or {}).get("dead_letters") or {}
    path = stage_dir / entry.get("path", DEAD_LETTERS)
    if not path.exists():
        return []
    return [DeadLetter(**json.loads(line)) for line in path.read_text().splitlines() if line]
