"""Beam's SDK worker processes, forked from a server that imported Beam once.

Beam's FnApiRunner in multi_processing mode starts every SDK worker of every job as a new
interpreter (`sh -c "python -m apache_beam.runners.worker.sdk_worker_main"`), which imports
Beam first: 1.4 CPU-seconds a worker on a quiet 2-core machine, twice that on a loaded one,
two workers or more per job and one job per map stage (or fused stages) of a run. Here the
FnApiRunner is given an environment of its own (`FORKED`) whose workers fork from seqline's
fork server with Beam's SDK harness preloaded, as the local runner's do: a worker costs about
a tenth of a CPU-second and runs the same harness (`sdk_worker_main.main`), told the same
things (its control, logging and pipeline options, in its environment variables), in a
process of its own.

The FnApiRunner waits for ever for a worker that is gone, so every worker is kept under its
job's key (the environment's payload) with how it ended: `lost` tells the Beam runner which
of a job's workers went while the job still needed them (any exit before Beam ended the job,
whatever its code, and a worker that could not be started at all), and `stop` ends the
others. A worker also exits when its driver does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

import grpc
import psutil
from apache_beam.portability.api import beam_fn_api_pb2_grpc, endpoints_pb2
from apache_beam.runners.portability.fn_api_runner.worker_handlers import (
    GrpcWorkerHandler,
    WorkerHandler,
)
from apache_beam.runners.portability.local_job_service import BeamFnLoggingServicer
from apache_beam.transforms import environments
from apache_beam.utils import thread_pool_executor
from google.protobuf import json_format, text_format

from seqline.orchestration.runners.forked import BEAM_PRELOAD, WorkerContext, exit_with
from seqline.pipeline.errors import SeqlineError

__all__ = ["BEAM_PRELOAD", "FORKED", "ForkedEnvironment", "Worker", "WorkersLost", "environment",
           "forget", "lost", "stop"]

FORKED = "seqline:env:forked_sdk_worker:v2"  # v2: the payload is the job's key
# How often a running worker is looked for in the process table, in case its fork server
# died or is stuck and cannot tell its end (a look reads /proc/PID/stat: microseconds).
LOOK_SECONDS = 0.5
# How long a fork server may take to tell a worker's exit code once the worker has ended (it
# reaps the worker, then writes the code): seconds on a loaded machine.
SERVER_WORD_SECONDS = 10.0


class WorkersLost(SeqlineError):
    """A stage's Beam jobs lost their SDK workers before any of them ran a block, several
    times in a row: the workers cannot start here (no memory, a process limit, a broken
    environment). The message says how the last one ended."""


@dataclass
class Worker:
    """A forked SDK worker of one job: its process once started, and how it ended."""

    process: psutil.Process | None = None
    gone: str | None = None  # how it ended: "exited with code 1", "could not be started: …"
    closing: bool = False  # Beam is ending the job: the worker is expected to exit now

    @property
    def lost(self) -> bool:
        """Gone while its job still needed it: the FnApiRunner would wait for it for ever."""
        return self.gone is not None and not self.closing


class _SameWorkersAnotherMode(logging.Filter):
    """The FnApiRunner warns that `direct_num_workers` above 1 wants another mode than
    in_memory: this environment's workers are processes all the same."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("If direct_num_workers is not equal to 1")


logging.getLogger("apache_beam.runners.portability.fn_api_runner.fn_runner").addFilter(
    _SameWorkersAnotherMode())

_jobs: dict[str, list[Worker]] = {}  # by job key, until the runner forgets the job
_lock = threading.Lock()


def environment(job: str) -> ForkedEnvironment:
    """The environment for one Beam job whose workers are kept under the key `job`."""
    return ForkedEnvironment(job, capabilities=environments.python_sdk_capabilities(),
                             artifacts=())


def lost(job: str) -> list[Worker]:
    """`job`'s workers that are gone while it still needs them."""
    with _lock:
        return [w for w in _jobs.get(job, []) if w.lost]


def forget(job: str) -> None:
    """Stop keeping `job`'s workers (the job has ended, or been given up)."""
    with _lock:
        _jobs.pop(job, None)


def stop(job: str, timeout: float = 1.0) -> set[int]:
    """Terminate `job`'s running workers, then kill those still running after `timeout`
    seconds; the pids stopped."""
    with _lock:
        found = [w.process for w in _jobs.get(job, []) if w.process is not None and w.gone is None]
    for worker in found:
        with contextlib.suppress(psutil.NoSuchProcess):  # it may exit on its own meanwhile
            worker.terminate()
    _, alive = psutil.wait_procs(found, timeout=timeout)
    for worker in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.kill()
    return {worker.pid for worker in found}


@environments.Environment.register_urn(FORKED, bytes)
class ForkedEnvironment(environments.Environment):
    """The environment whose SDK workers are forked (see the module's docstring)."""

    def __init__(self, job: str, capabilities: Any = (), artifacts: Any = (),
                 resource_hints: Any = None) -> None:
        super().__init__(capabilities, artifacts, resource_hints)
        self.job = job

    def to_runner_api_parameter(self, context: Any) -> tuple[str, bytes]:
        return FORKED, self.job.encode()

    @staticmethod
    def from_runner_api_parameter(payload: bytes, capabilities: Any, artifacts: Any,
                                  resource_hints: Any, context: Any) -> ForkedEnvironment:
        return ForkedEnvironment(payload.decode(), capabilities, artifacts, resource_hints)


@WorkerHandler.register_environment(FORKED, bytes)
class ForkedWorkerHandler(GrpcWorkerHandler):
    """Starts and waits for one forked SDK worker, as Beam's SubprocessSdkWorkerHandler does
    for a subprocess (local_job_service.SubprocessSdkWorker.run), and keeps how it ended."""

    def __init__(self, payload: bytes, state: Any, provision_info: Any,
                 grpc_server: Any) -> None:
        super().__init__(state, provision_info, grpc_server)
        self.kept = Worker()
        with _lock:  # kept before it starts: the runner sees a worker that never does
            _jobs.setdefault(payload.decode(), []).append(self.kept)

    def start_worker(self) -> None:
        self.worker_thread = threading.Thread(name="seqline-sdk-worker", target=self._run,
                                              daemon=True)
        self.worker_thread.start()

    def stop_worker(self) -> None:
        self.worker_thread.join()

    def close(self) -> None:
        self.kept.closing = True  # before Beam tells the worker to end (its control stream)
        super().close()

    def _run(self) -> None:
        logging_server = None
        try:
            # the worker's log records come back over gRPC, to a server of this process
            logging_server = grpc.server(thread_pool_executor.shared_unbounded_instance(),
                                         options=[("grpc.http2.max_pings_without_data", 0),
                                                  ("grpc.http2.max_ping_strikes", 0)])
            logging_port = logging_server.add_insecure_port("[::]:0")
            logging_server.start()
            beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(BeamFnLoggingServicer(),
                                                                      logging_server)
            self.kept.gone = self._fork_and_wait(logging_port)
        except BaseException as exc:  # a bug here must not leave the job waiting for ever
            if self.kept.process is not None:
                with contextlib.suppress(psutil.Error):
                    self.kept.process.kill()
            self.kept.gone = f"could not be watched: {type(exc).__name__}: {exc}"
            raise
        finally:
            if logging_server is not None:
                logging_server.stop(0)

    def _fork_and_wait(self, logging_port: int) -> str:
        """Fork the worker and wait for its end; how it ended."""
        told = dict(os.environ,
                    CONTROL_API_SERVICE_DESCRIPTOR=_descriptor(self.control_address),
                    LOGGING_API_SERVICE_DESCRIPTOR=_descriptor(f"localhost:{logging_port}"),
                    PIPELINE_OPTIONS=json_format.MessageToJson(
                        self.provision_info.provision_info.pipeline_options))
        if self.worker_id:
            told["WORKER_ID"] = self.worker_id
        # daemon: multiprocessing stops it at this process's exit rather than waiting for it
        worker = WorkerContext(BEAM_PRELOAD).Process(
            target=_serve, args=(os.getpid(), told), daemon=True, name="seqline-beam-worker")
        try:
            worker.start()
        except (OSError, EOFError) as exc:  # even from a new fork server (forked.py)
            return f"could not be started: {type(exc).__name__}: {exc}"
        with contextlib.suppress(psutil.NoSuchProcess):  # (it may have ended already)
            self.kept.process = psutil.Process(worker.pid)
        return _wait(worker, self.kept.process)


def _wait(worker: Any, process: psutil.Process | None) -> str:
    """Wait for a forked worker's end; how it ended.

    Its fork server tells (the sentinel pipe). But a server that died has the pipe say 255 at
    once for a worker that may run on (and finish its job): then the process table tells; and
    a server that is stuck says nothing: then the process table tells that it ended."""
    orphaned = False
    while process is not None and _running(process):
        if worker.exitcode is None:
            worker.join(LOOK_SECONDS)  # (returns as soon as the server tells the end)
        else:
            orphaned = True
            time.sleep(LOOK_SECONDS)
    if orphaned:
        return "ended after its fork server died (its exit code is unknown)"
    worker.join(SERVER_WORD_SECONDS)
    if worker.exitcode is None:
        return "ended, and its fork server did not say how (stuck?)"
    return _ended(worker.exitcode)


def _running(process: psutil.Process) -> bool:
    try:  # (psutil's is_running also tells a pid reused by another process)
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _ended(code: int | None) -> str:
    if code is not None and code < 0:
        return f"was killed by signal {-code} ({signal.Signals(-code).name})"
    return f"exited with code {code}"


def _descriptor(url: str) -> str:
    return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))


def _serve(driver: int, told: dict[str, str]) -> None:
    """A forked SDK worker: Beam's harness with the environment a subprocess would have had,
    exiting when its driver does (nothing else would stop a worker whose driver was killed
    while the worker waited on its control stream)."""
    os.environ.clear()
    os.environ.update(told)
    threading.Thread(target=exit_with, args=(driver,), daemon=True,
                     name="seqline-driver-watch").start()
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main([])
