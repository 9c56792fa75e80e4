"""The dashboard over an object-store root: `seqline dashboard --root s3://bucket/prefix`.

A real run writes to a bucket on moto's S3 server (tests/s3.py; children find it from the
AWS_* variables) with `seqline run --root s3://…`; a real `seqline dashboard` on the same URL
then serves its pages, reading manifests, shard tables, dead letters and verify.json from the
bucket, and the run store from where `seqline run` put it ($SEQLINE_HOME/stores/).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from seqline.orchestration.dashboard.files import manifest_of
from seqline.pipeline.artifacts import MANIFEST
from seqline.pipeline.storage import open_root
from tests.conftest import USERFNS
from tests.dashboard.conftest import Server, seqline
from tests.s3 import S3, s3_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e

RUN = "on-s3"
BAD = "not-a-number"
# 30 rows in blocks of 10, one bad row in the middle (a dead letter of ingest), stored as
# TFRecord shards of 10 records (a shard table), then preprocessed in parallel.
STAGES = ["read", "examples", "work"]
PIPELINE = """\
name: bucketed
errors: {max_fraction: 0.5}
stages:
  - {name: read, component: ingest,
     params: {format: csv, paths: [in.csv], schema: {x: int64}, block_records: 10}}
  - {name: examples, component: tfrecord_write, params: {shard_records: 10}}
  - {name: work, component: preprocess,
     params: {fn: "latency:skewed", fn_kwargs: {base_ms: 1, slow_every: 1000}}}
"""


@pytest.fixture(scope="module")
def bucket(s3_server: S3, tmp_path_factory) -> Iterator[tuple[str, Path]]:  # noqa: F811
    """A bucket with one finished run, and the local folder holding its pipeline; the run
    store and logs live under that folder's $SEQLINE_HOME, as for any URL root."""
    folder = tmp_path_factory.mktemp("s3run")
    rows = [str(i) for i in range(30)]
    rows[13] = BAD
    (folder / "in.csv").write_text("x\n" + "\n".join(rows) + "\n")
    (folder / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (folder / "pipeline.yaml").write_text(PIPELINE)
    name = f"dash-{uuid.uuid4().hex[:12]}"
    s3_server.fs().mkdir(name)
    root = f"s3://{name}/team/root"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEQLINE_HOME", str(folder / "home"))  # this process and its children
        done = seqline("run", str(folder / "pipeline.yaml"), "--root", root, "--run-id", RUN,
                       "--workers", "1")
        assert done.returncode == 0, done.stdout + done.stderr
        yield root, folder


@pytest.fixture(scope="module")
def s3_dashboard(bucket) -> Iterator[Server]:
    root, folder = bucket
    running = Server(root, logs=folder)
    yield running
    running.stop()


def _manifest(root: str, stage: str) -> dict:
    return json.loads((open_root(root) / "runs" / RUN / stage / MANIFEST).read_text())


def test_pages_of_a_run_on_s3_name_its_stages_shards_and_dead_letters(bucket, s3_dashboard):
    root, _ = bucket
    url = s3_dashboard.url
    runs = httpx.get(url + "/")
    assert runs.status_code == 200 and RUN in runs.text and "bucketed" in runs.text

    run = httpx.get(url + f"/runs/{RUN}")
    assert run.status_code == 200, run.text[:300]
    for name in STAGES:
        assert f"/stages/{name}" in run.text
    assert "succeeded" in run.text

    manifest = _manifest(root, "examples")
    shards = [s["path"] for s in manifest["shards"]]
    assert len(shards) == 3  # 29 good records, 10 to a shard
    stage = httpx.get(url + f"/runs/{RUN}/stages/examples")
    assert stage.status_code == 200, stage.text[:300]
    for shard in shards:  # the shard table, read from the manifest in the bucket
        assert shard in stage.text
    assert _manifest(root, "read")["dead_letters"]["count"] == 1
    read = httpx.get(url + f"/runs/{RUN}/stages/read")
    assert read.status_code == 200, read.text[:300]
    assert BAD in read.text  # the dead letter's raw text, from its per-attempt object

    detail = httpx.get(url + f"/api/runs/{RUN}").json()
    assert (detail["run_id"], detail["status"]) == (RUN, "succeeded")
    assert [s["name"] for s in detail["stages"]] == STAGES

    api_stage = httpx.get(url + f"/api/runs/{RUN}/stages/examples").json()
    assert api_stage["committed"] is True
    assert [r["path"] for r in api_stage["shards"]["rows"]] == shards
    assert [(r["seq_first"], r["sha256"]) for r in api_stage["shards"]["rows"]] == \
        [(s["seq_first"], s["sha256"]) for s in manifest["shards"]]
    [letter] = httpx.get(url + f"/api/runs/{RUN}/stages/read").json()["dead_letters"]["rows"]
    assert (letter["raw"], letter["seq"], letter["line"]) == (BAD, 13, 15)
    work = httpx.get(url + f"/api/runs/{RUN}/stages/work").json()
    assert [r["path"] for r in work["shards"]["rows"]] == \
        [s["path"] for s in _manifest(root, "work")["shards"]]


def test_the_run_page_shows_the_verdict_stored_in_the_bucket(bucket, s3_dashboard):
    root, _ = bucket
    verdict = json.loads((open_root(root) / "runs" / RUN / "verify.json").read_text())
    assert verdict["ok"] is True  # `seqline run` verified the run, saved in the bucket
    page = httpx.get(s3_dashboard.url + f"/runs/{RUN}").text
    assert "every artifact holds the ordering contract" in page
    assert "Not recorded for this run" not in page


@pytest.mark.parametrize("path", [
    f"/runs/{RUN}/stages/..%2F..%2F..%2Fsecret",
    f"/runs/{RUN}/stages/../../seqline.db",
    f"/api/runs/{RUN}/stages/%2e%2e%2f%2e%2e%2fsecret",
    f"/runs/{RUN}/stages/read%2F..%2F..%2Fother",
    "/runs/..%2Fsecret",
    "/api/runs/..%2F..%2Fsecret",
    f"/runs/{RUN}/stages/nonexistent",
])
def test_traversal_on_an_s3_root_gets_404(s3_dashboard, path):
    answer = httpx.get(s3_dashboard.url + path)
    assert answer.status_code == 404, (path, answer.text[:200])


def test_no_part_of_a_key_leaves_the_root_of_the_bucket(bucket, s3_server):  # noqa: F811
    """Below the store's lookup, the file rule itself: an object that `..` would reach
    exists, and still is not read."""
    root, _ = bucket
    place = open_root(root)
    stolen = place.parent / "x"  # what root/runs/../../x would name if `..` were followed
    (stolen / MANIFEST).write_text(json.dumps({"stolen": True}))
    assert manifest_of(place, RUN, "examples") is not None  # the rule lets the real one through
    for run_id, stage in (("../..", "x"), ("..", "../x"), (RUN, "read/../../../x"),
                          (RUN, "./read"), (RUN, "read//"), ("", "read"), (RUN, "/x")):
        assert manifest_of(place, run_id, stage) is None, (run_id, stage)
        assert manifest_of(root, run_id, stage) is None, (run_id, stage)  # as a URL too


@pytest.mark.parametrize(("root", "said"), [
    ("s3://key:secret@{bucket}/root", "carries credentials"),
    ("s3://no-such-bucket-{bucket}/root", "does not exist"),
    ("nosuchscheme://{bucket}/root", "unknown scheme"),
])
def test_a_bad_root_url_exits_2_in_one_line_before_serving(bucket, root, said):
    name = bucket[0].removeprefix("s3://").split("/")[0]
    done = seqline("dashboard", "--root", root.format(bucket=name), "--port", "0",
                   timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "secret" not in done.stderr and "seqline dashboard on" not in done.stdout
