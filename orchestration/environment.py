"""The one place seqline names its environment: where runs are kept, and the run store (read
by the command line's options as each command is parsed); and what the engines may print of
their own."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable
from types import TracebackType
from typing import Any

__all__ = ["DEFAULT_ROOT", "LAST_WORDS_FD", "ROOT_VARIABLE", "STORE_VARIABLE", "quiet_engines",
           "quiet_tensorflow", "take_launcher_pipe", "tell_launcher",
           "worker_environment"]

# Read when a command is parsed, not when this module is imported, so that a process that
# imported the CLI (a test's, a notebook's) and then set them is heard.
ROOT_VARIABLE = "SEQLINE_ROOT"
"""The artifact root when no --root is given; else DEFAULT_ROOT."""
DEFAULT_ROOT = ".seqline"
STORE_VARIABLE = "SEQLINE_STORE"
"""The run store's URL when no --store is given; else SQLite under the root."""

# The engines' Python loggers whose start-up lines are theirs, not the user's, and the level
# they keep. Beam's at WARNING: it relays its SDK workers' own log records (seqline's retry
# lines among them) through loggers of its own.
BEAM_JOB_SERVICE = "apache_beam.runners.portability.local_job_service"
BEAM_DATA_PLANE = "apache_beam.runners.worker.data_plane"
BEAM_WORKER_HANDLERS = "apache_beam.runners.portability.fn_api_runner.worker_handlers"
# A relayed record whose message is in seqline's voice: "stage 'features': …"
RELAYED_SEQLINE = re.compile(r"""message: "stage \\'[^\\]+\\': """)
LOG_LEVEL = "SEQLINE_LOG_LEVEL"  # seqline's logger level in worker processes (-q: ERROR)
ENGINE_LOGGERS = {"tensorflow": logging.ERROR, "absl": logging.ERROR, "ray": logging.ERROR,
                  "h5py": logging.ERROR, "keras": logging.ERROR, "apache_beam": logging.WARNING}


def quiet_engines(verbose: bool = False, quiet: bool = False) -> None:
    """Keep TensorFlow's C++ start-up lines (oneDNN, CUDA probing on a machine without a GPU)
    and the engines' Python loggers below warnings out of a run's output, unless `verbose`;
    with `quiet` (-q), seqline's own warnings too, in the workers as well (retry lines).

    Set in the environment, so worker processes (which inherit it) are quiet too; a user's own
    TF_CPP_MIN_LOG_LEVEL wins. `worker_environment` is the same for workers on other machines.
    """
    if quiet:
        os.environ[LOG_LEVEL] = "ERROR"  # read by pipeline/tasks.py in every worker
        logging.getLogger("seqline").setLevel(logging.ERROR)
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    for name, level in ENGINE_LOGGERS.items():
        logging.getLogger(name).setLevel(level)
    logging.getLogger(BEAM_JOB_SERVICE).addFilter(_beam_relay)
    # A worker that died (its block is run again, said in seqline's words) breaks the data
    # plane's stream to it: Beam logs a traceback of gRPC's for each.
    logging.getLogger(BEAM_DATA_PLANE).addFilter(
        lambda record: not record.getMessage().startswith("Failed to read inputs"))
    # and closing the job's handler of that worker raises the broken stream again
    logging.getLogger(BEAM_WORKER_HANDLERS).addFilter(
        lambda record: not record.getMessage().startswith(
            "Error closing worker_handler <seqline."))


def _beam_relay(record: logging.LogRecord) -> bool:
    """Beam's job service relays an SDK worker's log record as the text of its protobuf
    ("Worker: severity: WARN timestamp {…} message: "stage 'features': …" …"): a seqline line
    (a retry) is told as seqline says it on the other runners, from the seqline logger and
    with its stage; the start-up warning about a folder the FnApiRunner never sets, not at all.
    """
    text = record.args[0] if isinstance(record.args, tuple) and record.args else None
    if not isinstance(text, str):
        return True
    if "semi_persistent_directory" in text:
        return False
    if RELAYED_SEQLINE.search(text) is None:
        return True
    from apache_beam.portability.api import beam_fn_api_pb2  # (Beam relays: it is imported)
    from google.protobuf import text_format

    entry = beam_fn_api_pb2.LogEntry()
    try:
        text_format.Parse(text, entry)
    except text_format.ParseError:
        return True
    record.name, record.msg, record.args = "seqline", entry.message, ()
    record.stage = entry.transform_id.split("/")[0] or None
    return True


def worker_environment() -> dict[str, str]:
    """What `quiet_engines` set, for workers that do not inherit this process's environment
    (a Ray cluster's)."""
    return {name: os.environ[name] for name in ("TF_CPP_MIN_LOG_LEVEL", LOG_LEVEL)
            if name in os.environ}


def quiet_tensorflow() -> None:
    """Import TensorFlow with the process's stderr (file descriptor 2) closed to it.

    TF 2.21 loads its CUDA stubs through absl's C++ logging before absl is initialised, so
    "All log messages before absl::InitializeLog()" and "Could not find cuda drivers" reach
    stderr whatever TF_CPP_MIN_LOG_LEVEL says; only the descriptor can keep them out. A Python
    error while importing still propagates as an exception (it is not written to fd 2 here).
    """
    if "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is None:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            import tensorflow  # noqa: F401 - imported for its side effect, once
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# A launched run also says its one-line error on this descriptor, a pipe to its scheduler:
# its log is on the root's disk, which may be the very disk whose filling killed the run.
LAST_WORDS_FD = "SEQLINE_LAST_WORDS_FD"
LAST_WORDS_BYTES = 4000  # one write under PIPE_BUF (4096) is never interleaved


_launcher_pipe: int | None = None


def take_launcher_pipe() -> None:
    """This process's launcher's pipe, taken out of the environment (once, as the CLI
    starts): the run's own processes (workers, engines) must not inherit its number.

    From then on an exception nobody caught (a bug) tells the launcher its line too, before
    Python prints its traceback: to stderr, which may be a log on a full disk (soak finding 8).
    """
    global _launcher_pipe
    fd = os.environ.pop(LAST_WORDS_FD, None)
    if fd is not None and fd.isdigit():
        _launcher_pipe = int(fd)
        sys.excepthook = _telling_launcher(sys.excepthook)


def _telling_launcher(hook: Callable[..., Any]) -> Callable[..., Any]:
    """`hook` (Python's excepthook, or Typer's), after the launcher is told the exception's
    line. Example: "error: uncaught OSError: [Errno 5] Input/output error: '/r/x' (its
    traceback went to stderr)"."""

    def tell_then_hook(kind: type[BaseException], error: BaseException,
                       tb: TracebackType | None) -> None:
        line = " ".join("".join(traceback.format_exception_only(kind, error)).split())
        tell_launcher(f"error: uncaught {line} (its traceback went to stderr)")
        hook(kind, error, tb)

    return tell_then_hook


def tell_launcher(line: str) -> None:
    """Say `line` (a run's one-line error) to the scheduler that launched this run, if one
    did: written to its pipe, ignored if nobody reads (a scheduler gone; the line is in the
    log too, disk permitting)."""
    if _launcher_pipe is None:
        return
    data = line.strip().encode()[:LAST_WORDS_BYTES] + b"\n"
    with contextlib.suppress(OSError):
        os.write(_launcher_pipe, data)
