"""The exact commands that rerun, resume or backfill a recorded run: one builder, so that
`seqline runs show` and the dashboard print the same lines."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from seqline.orchestration.schedule.times import run_id_for
from seqline.orchestration.store.errors import shown_url
from seqline.pipeline.errors import RESUME

__all__ = ["RESUMABLE", "RerunCommand", "rerun_commands", "resume_command", "where_words",
           "with_its_resume"]

# A run that did not finish: what it committed is kept and the rest runs (`--resume`).
RESUMABLE = ("failed", "cancelled", "interrupted")
# `seqline run`'s defaults (cli/run.py): an option at its default is left out of a command.
DEFAULTS = {"window": None, "queue": 4, "overlap": True, "cache": True,
            "mode": "multi_processing"}


@dataclass(frozen=True)
class RerunCommand:
    """A command to paste: `action` (rerun, resume, backfill), its words, and what it does."""

    action: str
    argv: tuple[str, ...]
    does: str

    @property
    def text(self) -> str:
        """The command as a shell line, every word quoted where the shell needs it."""
        return shlex.join(self.argv)


def rerun_commands(run: dict[str, Any], root: str, store: str | None = None,
                   schedule: str | None = None, fire_time: datetime | None = None,
                   executable: str = "seqline") -> list[RerunCommand]:
    """The commands for `run` (`runs show`'s document): rerun it as it ran, resume it if it
    did not finish, backfill its fire time if a schedule launched it.

    Args:
        run: pipeline_file, runner, options (as RunOptions.recorded), status, run_id.
        root: the artifact root as `--root` takes it (an absolute path or a URL).
        store: the run store's URL when it is not the root's default (shown with its
            password as ***: a secret never reaches a page).
        schedule: the schedule whose tick launched the run, and `fire_time` that tick's.
        executable: the command's first word.

    Returns:
        The commands, rerun first; none for a run built in Python (no pipeline file).

    Example: a failed local run of /p/demo.yaml with 4 workers ->
        seqline run /p/demo.yaml --root /r --runner local --workers 4
        seqline run /p/demo.yaml --root /r --runner local --workers 4 --resume --run-id X
    """
    where = where_words(root, store)
    found: list[RerunCommand] = []
    if run.get("pipeline_file"):
        base = [executable, "run", run["pipeline_file"], *where, *_runner_words(run)]
        found.append(RerunCommand("rerun", tuple(base), "runs the pipeline again under a new "
                                  "id (stages with unchanged inputs are reused from cache)"))
        if run.get("status") in RESUMABLE:
            found.append(RerunCommand(
                "resume", (*base, "--resume", "--run-id", run["run_id"]),
                "finishes this run: keeps its committed stages, runs the rest"))
    # (not for a backfill's own run that did not finish: the backfill of its fire time would
    # find it there and launch nothing; it is resumed, above)
    if schedule is not None and fire_time is not None and not (
            run.get("status") in RESUMABLE
            and run.get("run_id") == run_id_for(schedule, fire_time, "backfill")):
        at = fire_time.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        found.append(RerunCommand(
            "backfill", (executable, "backfill", schedule, "--from", at, "--to", at, *where),
            f"runs schedule {schedule}'s fire time {at} again, as a backfill"))
    return found


def where_words(root: str, store: str | None) -> list[str]:
    """`--root ROOT` and, when the store is not the root's default, `--store URL` (its
    password as ***): where a command finds a run."""
    return ["--root", root, *(["--store", shown_url(store)] if store else [])]


def _runner_words(run: dict[str, Any]) -> list[str]:
    """The runner and the options the run used, as `seqline run` takes them."""
    options = dict(run.get("options") or {})
    words = ["--runner", run["runner"], "--workers", str(options.get("workers", 2))]
    if options.get("window") != DEFAULTS["window"]:
        words += ["--window", str(options["window"])]
    if options.get("queue", DEFAULTS["queue"]) != DEFAULTS["queue"]:
        words += ["--queue", str(options["queue"])]
    if options.get("overlap", True) is False:
        words.append("--one-by-one")
    if options.get("cache", True) is False:
        words.append("--no-cache")
    if run["runner"] == "ray" and options.get("address"):
        words += ["--ray-address", str(options["address"])]
    if run["runner"] == "beam":
        if options.get("mode", DEFAULTS["mode"]) != DEFAULTS["mode"]:
            words += ["--beam-mode", str(options["mode"])]
        for option in options.get("options") or []:  # recorded as Beam takes them: --k=v
            words += ["--beam-option", str(option).lstrip("-")]
    return words


def resume_command(run: dict[str, Any], root: str, store: str | None) -> str | None:
    """The command that finishes `run` once it has stopped (failed, cancelled), as `runs
    show` prints it; None for a run that cannot be resumed (no pipeline file recorded)."""
    return next((c.text for c in rerun_commands({**run, "status": "failed"}, root, store)
                 if c.action == "resume"), None)


def with_its_resume(message: str, run: dict[str, Any], root: str, store: str | None) -> str:
    """`message` with the resume hint said where no run was known (errors.RESUME: a full
    disk, Ray not starting) made this run's own command."""
    command = resume_command(run, root, store) if RESUME in message else None
    return message.replace(RESUME, f"`{command}`") if command else message
