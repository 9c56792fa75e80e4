"""What an object-store root costs against a local root, on the same data job.

Usage: .venv/bin/python benchmarks/object_store.py [--rows 200000] [--repeats 2]

The data job of benchmarks/data_stages.py (ingest -> tfrecord_write -> preprocess, generated
weather rows) through `seqline.Pipeline.run` on the local runner (2 workers), alternately with
a local root and with `s3://bench/root` on moto's S3 server (tests/s3.py's stand-in, started
here on a loopback port). Reported: the median wall time of each, then `verify` alone on each
root. moto is a Python server in this process's machine: each request costs it far more CPU
than real S3 (and it competes with the workers for the 2 cores), while real S3 adds network
latency per request instead; so the figures bound the cost of the protocol (one PUT per shard,
one per manifest, listings at commit and resume), not what a real bucket would measure.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from data_stages import _generate  # noqa: E402 - the same generated data as the data bench

import seqline  # noqa: E402
from seqline.orchestration.verify import verify_run  # noqa: E402


def _moto() -> tuple[object, str]:
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint})
    import s3fs

    s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}).mkdir("bench")
    return server, endpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    server, _ = _moto()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["SEQLINE_HOME"] = str(folder / "home")
        pipeline = seqline.Pipeline.from_yaml(_generate(folder / "data", args.rows))
        roots = {"local": str(folder / "root"), "s3 (moto)": "s3://bench/root"}
        pipeline.run(root=roots["local"], run_id="warm", cache=False, verify=False)
        runs: dict[str, list[float]] = {name: [] for name in roots}
        checks: dict[str, list[float]] = {name: [] for name in roots}
        for i in range(args.repeats):
            for name, root in roots.items():
                run_id = f"r{i}"
                start = time.perf_counter()
                pipeline.run(root=root, run_id=run_id, cache=False, verify=False)
                runs[name].append(time.perf_counter() - start)
                start = time.perf_counter()
                assert all(c.ok for c in verify_run(root, run_id))
                checks[name].append(time.perf_counter() - start)
    server.stop()  # type: ignore[attr-defined]
    print(f"{args.rows:,} rows, local runner, 2 workers, median of {args.repeats}")
    print("| root | run (s) | verify (s) |")
    print("|------|---------|------------|")
    for name in roots:
        print(f"| {name} | {statistics.median(runs[name]):.2f} "
              f"| {statistics.median(checks[name]):.2f} |")
    ratio = statistics.median(runs["s3 (moto)"]) / statistics.median(runs["local"])
    print(f"s3 / local run time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
