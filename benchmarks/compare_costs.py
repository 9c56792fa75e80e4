"""compare.py's rows of seqline's own costs: verify's share of a run, the fixed cost of a tiny
run and of `seqline --help`, and the orchestration machinery's share of a 1M-row run."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from compare_bench import BENCHMARKS, Bench, seconds_list
from compare_measure import measure

# The console script, as a user runs it (compare_bench.SEQLINE is `python -m`, one import more).
SEQLINE_SCRIPT = str(Path(sys.executable).parent / "seqline")


def c11_verify(b: Bench) -> None:
    rows = b.args.rows
    # Its own pairs, each verified run beside an unverified one: the runs of rows 3 and 8 are
    # minutes apart, and the machine's speed drifts by more than the 10 % asked. One pair
    # varies by up to 15 %: 9 pairs, as row 13's, taking turns at going first, after one run
    # that makes the root's run store (a new root's first run pays Alembic's 0.4 s).
    pipeline = b.job_pipeline(rows)
    pairs = 1 if b.args.smoke else max(9, b.args.repeats)
    b.seqline(pipeline)
    verified, bare = [], []
    for pair in range(pairs):
        for verify in (True, False) if pair % 2 == 0 else (False, True):
            (verified if verify else bare).append(b.seqline(pipeline, verify=verify))
    ratios = [v.wall / n.wall for v, n in zip(verified, bare, strict=True)]
    b.add("11", "what verify adds: the whole job verified ÷ with --no-verify",
          f"{statistics.median(v.wall for v in verified):.2f} s verified",
          f"{statistics.median(n.wall for n in bare):.2f} s --no-verify", ratios, "≤ 1.10",
          lambda r: r <= 1.10)
    b.note("11", f"The whole job of 3 at {rows:,} rows, after one run that made the root's "
           f"store: {pairs} pairs of a verified run and a --no-verify one, taking turns at "
           f"going first; process wall s: verified "
           f"{seconds_list([v.wall for v in verified])}, --no-verify "
           f"{seconds_list([n.wall for n in bare])}. Verify reads back every shard of the "
           "stored artifact (SHA-256, framing, every record's seq; decision 50).")


def c12_fixed_cost(b: Bench) -> None:
    pipeline = b.job_pipeline(1_000)
    b.seqline(pipeline, verify=True)  # the root's store is made once, as on a user's machine
    times = 2 if b.args.smoke else max(5, b.args.repeats)
    tiny = [b.seqline(pipeline, verify=True).wall for _ in range(times)]
    b.add("12 (run)", "fixed cost: a 1,000-row ingest → preprocess run, wall s",
          f"{statistics.median(tiny):.2f} s", "-", tiny, "≤ 0.7", lambda r: r <= 0.7)
    helps = [measure([SEQLINE_SCRIPT, "--help"], b.env, "seqline --help").wall
             for _ in range(times)]
    b.add("12 (--help)", "`seqline --help`, wall s", f"{statistics.median(helps):.2f} s", "-",
          helps, "≤ 0.3", lambda r: r <= 0.3)
    b.note("12", f"A fresh `seqline run` process (`python -m seqline.orchestration.cli`), the "
           "whole job of 3 on 1,000 rows, verified, into a root whose run store an earlier "
           f"run made; {times} runs, wall s {seconds_list(tiny)}. `seqline --help` (the "
           f"console script), {times} runs: {seconds_list(helps)}. The ratio column is the "
           "wall seconds. benchmarks/startup.py profiles where the time goes.")


def c13_machinery(b: Bench) -> None:
    rows = b.args.rows
    # A 3 % bound, where one pair of runs varies by up to 10 % (0.98-1.09 seen in one set of
    # 5): more pairs than the others, 9, so that the median is of the pairs, not of the draw.
    pairs = 1 if b.args.smoke else max(9, b.args.repeats)
    run = measure([sys.executable, str(BENCHMARKS / "store_cost.py"), "--machinery", "--rows",
                   str(rows), "--repeats", str(pairs)], b.env,
                  f"store_cost.py --machinery, {rows:,} rows")
    recorded, bare = run.result["recorded"], run.result["bare"]
    ratios = [r / n for r, n in zip(recorded, bare, strict=True)]
    b.add("13", "the machinery: a run recorded (store, events, samples, data profile) ÷ "
          "the same run bare", f"{statistics.median(recorded):.2f} s recorded",
          f"{statistics.median(bare):.2f} s bare", ratios, "≤ 1.03", lambda r: r <= 1.03,
          digits=3)
    b.note("13", f"benchmarks/store_cost.py `orchestration_cost`, {rows:,} rows of its data "
           "job (ingest → tfrecord_write → preprocess), local runner, 2 workers, --no-verify, "
           f"alternated in one process, {pairs} pairs after one uncounted run of each: "
           "`seqline.Pipeline.run` (plan's store reads, the run "
           "store, its events and samples, run.json, every stage's data profile) against "
           "`run_pipeline` on a runner started the same way, with no store and no profile. "
           f"Wall s per repeat: recorded {seconds_list(recorded)}, bare {seconds_list(bare)}.")
