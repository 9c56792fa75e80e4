"""The Beam runner's scratch folder for one stage job: what the driver and the job's workers
exchange (blocks in, each stage's results out, a done marker per block, attempt markers)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import Future

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs

from seqline.orchestration.runners.beam_transforms import (
    attempts_folder,
    done_name,
    read_result,
    result_name,
)
from seqline.pipeline.errors import InternalError
from seqline.pipeline.tasks import BlockResult, MapTask

__all__ = ["attempt_markers", "charge", "listing", "nearby", "once_done", "out_folders", "remove",
           "results_of"]

POLL_SECONDS = 0.02  # how often the driver looks for the next block done, nearby
LIST_SECONDS = 0.2  # how often it lists the done markers on a remote store (a request each)


def out_folders(work: str, tasks: list[MapTask]) -> list[str]:
    """Where each stage of a job writes its blocks' results (stage names are safe names)."""
    return [f"{work}/out-{task.stage}" for task in tasks]


def charge(tasks: list[MapTask], work: str, dead: set[int], stopped: set[int]) -> bool:
    """Leave the attempt markers of the blocks whose worker died (their next attempt
    counts them), remove those of the workers only stopped; whether any was charged."""
    charged = False
    for out in out_folders(work, tasks):
        fs, _ = url_to_fs(out)
        for marker in attempt_markers(out):
            pid = int(marker.rsplit(".", 1)[1])
            if pid in dead:
                charged = True
            elif pid in stopped:
                fs.rm_file(marker)
    return charged


def results_of(index: int, outs: list[str]) -> Iterator[BlockResult]:
    """Block `index`'s results, stage by stage, up to the stage where it stopped."""
    for out in outs:
        try:
            yield read_result(f"{out}/{result_name(index)}")
        except FileNotFoundError:
            return


def nearby(fs: AbstractFileSystem) -> bool:
    """A folder on this machine or in this process's memory: cheap to list often."""
    return bool({"file", "local", "memory"} & set(fs.protocol if isinstance(fs.protocol, tuple)
                                                   else (fs.protocol,)))


def listing(fs: AbstractFileSystem, folder: str) -> set[str]:
    """What is in `folder`; nothing if it is not there (an object store has no empty folders)."""
    return set(fs.ls(folder, detail=False)) if fs.exists(folder) else set()


def attempt_markers(folder: str) -> list[str]:
    """The attempt markers left in a stage's results `folder` (beam_transforms._run_block)."""
    fs, path = url_to_fs(attempts_folder(folder))
    fs.invalidate_cache(path)
    return list(fs.glob(f"{path}/*.attempt-*"))


def remove(url: str) -> None:
    fs, path = url_to_fs(url)
    with contextlib.suppress(FileNotFoundError, OSError):
        fs.rm(path, recursive=True)


def once_done(ended: Future[None], fs: AbstractFileSystem, marks: str, index: int,
              stage: str) -> set[str]:
    """Done markers in `marks`, looked for until block `index`'s is one of them; the job's
    error if it `ended` first. Nearby (a local folder, memory) only that marker is looked
    for, every POLL_SECONDS: a listing would cost the driver more with every block done. On
    a remote store the folder is listed every LIST_SECONDS (one LIST request finds every
    marker there)."""
    marker, near = f"{marks}/{done_name(index)}", nearby(fs)
    while True:
        over = ended.done()
        if over:
            ended.result()  # the job's own error, if it failed
        if near:
            done = {marker} if fs.exists(marker) else set()
        else:
            fs.invalidate_cache(marks)
            done = listing(fs, marks)
        if marker in done:
            return done
        if over:
            raise InternalError(f"stage {stage!r} on Beam: the job ended without block {index} "
                                "done")
        with contextlib.suppress(TimeoutError):
            ended.exception(timeout=POLL_SECONDS if near else LIST_SECONDS)
