"""Beam's SDK worker processes, forked from a server that imported Beam once.

Beam's FnApiRunner in multi_processing mode starts every SDK worker of every job as a new
interpreter (`sh -c "python -m apache_beam.runners.worker.sdk_worker_main"`), which imports
Beam first: about 2 CPU-seconds a worker, two workers or more per job and one job per map
stage (or fused stages) of a run. Here the FnApiRunner is given an environment of its own
(`FORKED`) whose workers fork from seqline's fork server with Beam's SDK harness preloaded,
as the local runner's do: a worker starts in milliseconds and runs the same harness
(`sdk_worker_main.main`), told the same things (its control, logging and pipeline options,
in its environment variables), in a process of its own.

This process keeps its workers (`started`), so that the Beam runner can tell their deaths
and stop them (`stop`); a worker also exits when its driver does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
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

from seqline.orchestration.runners.forked import PRELOAD, WorkerContext, exit_with

__all__ = ["FORKED", "ForkedEnvironment", "Worker", "forget", "started", "stop"]

FORKED = "seqline:env:forked_sdk_worker:v1"
# Beam's SDK harness and seqline's transforms (most of a worker's imports), then what the
# local runner's workers import (the stages' own).
BEAM_PRELOAD = ["apache_beam.runners.worker.sdk_worker_main",
                "seqline.orchestration.runners.beam_transforms", *PRELOAD]
# The exit that Beam's SubprocessSdkWorker reports, said in the same words (beam.py quiets it
# when the runner stopped the worker itself).
EXITED = "Worker subprocess exited with return code"



@dataclass
class Worker:
    """A forked SDK worker of this process: its process, and its exit code once it ended."""

    process: psutil.Process
    exitcode: int | None = None


class _SameWorkersAnotherMode(logging.Filter):
    """The FnApiRunner warns that `direct_num_workers` above 1 wants another mode than
    in_memory: this environment's workers are processes all the same."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("If direct_num_workers is not equal to 1")


logging.getLogger("apache_beam.runners.portability.fn_api_runner.fn_runner").addFilter(
    _SameWorkersAnotherMode())

_workers: dict[int, Worker] = {}  # kept until the runner forgets them, so no end goes unseen
_lock = threading.Lock()


def started() -> dict[int, Worker]:
    """This process's SDK workers by pid, running or ended, not yet forgotten."""
    with _lock:
        return dict(_workers)


def forget(pids: set[int]) -> None:
    """Stop keeping these workers (their job has ended)."""
    with _lock:
        for pid in pids:
            _workers.pop(pid, None)


def stop(timeout: float = 1.0) -> set[int]:
    """Terminate this process's running SDK workers, then kill those still running after
    `timeout` seconds; the pids stopped."""
    found = [w.process for w in started().values() if w.exitcode is None]
    for worker in found:
        with contextlib.suppress(psutil.NoSuchProcess):  # it may exit on its own meanwhile
            worker.terminate()
    _, alive = psutil.wait_procs(found, timeout=timeout)
    for worker in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.kill()
    return {worker.pid for worker in found}


@environments.Environment.register_urn(FORKED, None)
class ForkedEnvironment(environments.Environment):
    """The environment whose SDK workers are forked (see the module's docstring)."""

    def to_runner_api_parameter(self, context: Any) -> tuple[str, None]:
        return FORKED, None

    @staticmethod
    def from_runner_api_parameter(payload: None, capabilities: Any, artifacts: Any,
                                  resource_hints: Any, context: Any) -> ForkedEnvironment:
        return ForkedEnvironment(capabilities, artifacts, resource_hints)

    @classmethod
    def default(cls) -> ForkedEnvironment:
        return cls(capabilities=environments.python_sdk_capabilities(), artifacts=())


@WorkerHandler.register_environment(FORKED, None)
class ForkedWorkerHandler(GrpcWorkerHandler):
    """Starts and waits for one forked SDK worker, as Beam's SubprocessSdkWorkerHandler does
    for a subprocess (local_job_service.SubprocessSdkWorker.run)."""

    def __init__(self, payload: None, state: Any, provision_info: Any,
                 grpc_server: Any) -> None:
        super().__init__(state, provision_info, grpc_server)

    def start_worker(self) -> None:
        # "run_worker": the thread name Beam gives its own, which beam.py's hook knows
        self.worker_thread = threading.Thread(name="run_worker", target=self._run, daemon=True)
        self.worker_thread.start()

    def stop_worker(self) -> None:
        self.worker_thread.join()

    def _run(self) -> None:
        # the worker's log records come back over gRPC, to a server of this process
        logging_server = grpc.server(thread_pool_executor.shared_unbounded_instance(),
                                     options=[("grpc.http2.max_pings_without_data", 0),
                                              ("grpc.http2.max_ping_strikes", 0)])
        logging_port = logging_server.add_insecure_port("[::]:0")
        logging_server.start()
        beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(BeamFnLoggingServicer(),
                                                                  logging_server)
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
            assert worker.pid is not None
            kept = Worker(psutil.Process(worker.pid))
            with _lock:
                _workers[worker.pid] = kept
            worker.join()
            kept.exitcode = worker.exitcode
            if worker.exitcode:
                raise RuntimeError(f"{EXITED} {worker.exitcode}")
        finally:
            if worker.is_alive():
                worker.kill()
            logging_server.stop(0)


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
