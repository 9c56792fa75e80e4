"""What the run store refuses, by name: a conflict with what it holds, or a name it lacks."""

from __future__ import annotations

from seqline.pipeline.errors import ConfigError, RunNotFound, SeqlineError

__all__ = ["Conflict", "LeaseHeld", "RunIdTaken", "RunNotFound", "ScheduleExists",
           "ScheduleNotFound"]

# Callers catch these by name: "no such run" or "that id is taken" is an answer to act on,
# not a ConfigError caught as control flow. The CLI prints each as its one line, exit 2.


class Conflict(SeqlineError):
    """The store refused a write because of what it already holds (a key taken, a lease
    held): the request was well formed, the store's state stands in its way."""


class RunIdTaken(Conflict):
    """A run with this id is already in the store."""


class ScheduleExists(Conflict):
    """A schedule with this name is already in the store."""


class LeaseHeld(Conflict):
    """Another live scheduler holds this store's lease (one scheduler per store).

    Attributes:
        host: the holder's machine.
        pid: the holder's process id there.
    """

    def __init__(self, message: str, host: str, pid: int) -> None:
        super().__init__(message)
        self.host = host
        self.pid = pid


class ScheduleNotFound(ConfigError):
    """No schedule of that name in the store (a name the user gave: fix it, as RunNotFound)."""

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.name = name
