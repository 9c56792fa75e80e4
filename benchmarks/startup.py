"""Start-up: what `seqline --help`, `seqline run --help` and a tiny run cost (issue 28).

Usage: .venv/bin/python benchmarks/startup.py [--smoke] [--repeats 5] [--before REV]
       [--out benchmarks/STARTUP.md]

Each command is its own process, started `--repeats` times, the commands taking turns so that
a burst of other work on the machine falls on all of them alike. The table gives the best wall
time (the run least disturbed by other work), the median, and the best CPU time of the
command's own process (user + system; a worker process's is not in it): on a shared machine
the CPU time says what the command costs, the wall time what a person waits.

- `python -c "import pyarrow"`: the reference, one library most commands end up loading.
- `seqline --help`, `seqline run --help`: the command tree and its help (target 0.3 s each).
- the tiny run: a 1,000-row CSV (k, x, s) -> ingest -> preprocess (a pyarrow function adding
  x * x as `x2`), `seqline run --no-cache` on the local runner, into a root whose run store a
  first run already made: the fixed cost of a run, whose work takes milliseconds (target
  0.7 s). It verifies its shards, as `seqline run` does by default.

`--before REV` measures the same commands at another revision too, taking turns with this
one: its `pipeline/`, `components/` and `orchestration/` (`git archive`) put first on
PYTHONPATH, so the console script, the fork server and the workers all import that tree.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from compare_report import processor
from verify import make_job

REPO = Path(__file__).resolve().parent.parent
SEQLINE = str(Path(sys.executable).parent / "seqline")
HELP_TARGET = 0.3  # seconds, issue 28: `seqline --help` (and any command's --help)
RUN_TARGET = 0.7  # seconds, issue 28: the fixed cost of a tiny run


def tree_at(revision: str, folder: Path) -> Path:
    """`revision`'s packages as an importable `seqline` (as `make typecheck` lays them out);
    returns the folder to put first on PYTHONPATH."""
    source = folder / "source"
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "pipeline",
                              "components", "orchestration"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    package = folder / "path" / "seqline"
    package.mkdir(parents=True)
    shutil.copy(source / "orchestration" / "public" / "__init__.py", package / "__init__.py")
    for name in ("pipeline", "components", "orchestration"):
        (package / name).symlink_to(source / name)
    return folder / "path"


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the process itself) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n"
                 f"{done.stderr[-3000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(commands: dict[str, list[str]], trees: dict[str, dict[str, str]], job: Path,
            repeats: int) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Each command under each tree, `repeats` times, taking turns; (wall, cpu) per run."""
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for env in trees.values():  # the run store made, the page cache warm: not counted
        timed(commands["tiny run"][:-1], job, env)
    for _ in range(repeats):
        for name, command in commands.items():
            for tree, env in trees.items():
                results.setdefault((name, tree), []).append(timed(command, job, env))
    return results


def table(results: dict[tuple[str, str], list[tuple[float, float]]], trees: list[str]
          ) -> list[str]:
    targets = {"seqline --help": HELP_TARGET, "seqline run --help": HELP_TARGET,
               "tiny run": RUN_TARGET}
    reference = min(w for w, _ in results[("import pyarrow", trees[-1])])
    lines = ["| command | tree | best wall s | median wall s | best CPU s | target s | "
             "best ÷ target | best ÷ `import pyarrow` |", "|---|---|---|---|---|---|---|---|"]
    for (name, tree), runs in results.items():
        walls = [w for w, _ in runs]
        best = min(walls)
        target = targets.get(name)
        ratio = f"**{best / target:.2f}**" if target else ""
        lines.append(f"| {name} | {tree} | {best:.3f} | {statistics.median(walls):.3f} | "
                     f"{min(c for _, c in runs):.3f} | {target or ''} | {ratio} | "
                     f"{best / reference:.2f} |")
    if len(trees) == 2:
        lines += ["", "| command | best wall, before ÷ after | best CPU, before ÷ after |",
                  "|---|---|---|"]
        for name in dict.fromkeys(n for n, _ in results):
            old, new = results[(name, trees[0])], results[(name, trees[1])]
            lines.append(f"| {name} | {min(w for w, _ in old) / min(w for w, _ in new):.2f} | "
                         f"{min(c for _, c in old) / min(c for _, c in new):.2f} |")
    return lines


def machine() -> str:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{datetime.date.today()}: {os.cpu_count()} cores ({processor()}), Python "
            f"{platform.python_version()}, pyarrow {pa.__version__}; load average {load} "
            "(1 / 5 / 15 min) at the end")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one run of each (CI keeps it "
                                                             "working); writes no file")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", metavar="REV", help="also measure this git revision")
    parser.add_argument("--out", type=Path, help="default: benchmarks/STARTUP.md (none with "
                                                 "--smoke)")
    args = parser.parse_args()
    repeats = 1 if args.smoke else args.repeats
    out = args.out or (None if args.smoke else REPO / "benchmarks" / "STARTUP.md")
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        job = make_job(Path(tmp) / "job", 1_000, stored=False, name="tiny").parent
        # Bytecode written, as on a user's machine: with PYTHONDONTWRITEBYTECODE a tree whose
        # .pyc files are not there yet compiles every module on every run.
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
               "PYTHONPATH": os.pathsep.join(
                   filter(None, [str(job), os.environ.get("PYTHONPATH")]))}
        trees = {"now": env}
        if args.before:
            path = tree_at(args.before, Path(tmp) / "before")
            trees = {f"before ({args.before})": {**env, "PYTHONPATH": os.pathsep.join(
                [str(path), env["PYTHONPATH"]])}, "now": env}
        commands = {"import pyarrow": [sys.executable, "-c", "import pyarrow"],
                    "seqline --help": [SEQLINE, "--help"],
                    "seqline run --help": [SEQLINE, "run", "--help"],
                    "tiny run": [SEQLINE, "run", str(job / "pipeline.yaml"), "--root",
                                 str(Path(tmp) / "root"), "--no-cache"]}
        results = measure(commands, trees, job, repeats)
    lines = table(results, list(trees))
    text = "\n".join([f"Machine: {machine()}. Best of {repeats}.", "", *lines])
    print(text)
    if out is not None:
        out.write_text(f"# Start-up: `seqline --help` and a tiny run\n\n"
                       f"Written by `.venv/bin/python {' '.join(sys.argv)}` (see its docstring "
                       "for what is measured and how); why the figures are what they are: "
                       "docs/decisions/0049-start-up.md.\n\n" + text + "\n")


if __name__ == "__main__":
    main()
