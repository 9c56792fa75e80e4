"""`seqline lookup` and the lookup page on the dashboard's run of the demo: every place it
names agrees with reading the artifacts directly."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from seqline.orchestration.lookup import lookup_seq
from seqline.pipeline.tfrecord.coding import decode, schema_from_text
from seqline.pipeline.tfrecord.reading import read_shard
from tests.conftest import USERFNS
from tests.dashboard.conftest import seqline

pytestmark = pytest.mark.e2e

# The demo as the dashboard's `root` ran it (15 epochs): the lookup reads what any run stores.
DEMO_RUN = "demo-a"


def _manifest(root: Path, stage: str) -> dict:
    return json.loads((root / f"runs/{DEMO_RUN}" / stage / "manifest.json").read_text())


def _record(root: Path, stage: str, shard: str, offset: int) -> dict:
    """The shard's record at `offset`, read with the TFRecord reader and decoder."""
    m = _manifest(root, stage)
    batch = decode(read_shard(root / f"runs/{DEMO_RUN}" / stage / shard, m["compression"]),
                   schema_from_text(m["schema"]))
    return batch.slice(offset, 1).to_pylist()[0]


@pytest.mark.parametrize("seq", [100, 1000])
def test_lookup_agrees_with_the_artifacts(root, seq):
    places = {p.stage: p for p in lookup_seq(root, DEMO_RUN, seq).stages}
    assert all(p.found for p in places.values()), places
    read = places["read"].detail
    line = Path(read["file"]).read_text().splitlines()[read["source_line"] - 1]
    assert read["source_line"] == seq + 2  # the header, then one line per record
    for stage in ("examples", "features"):
        where = places[stage].detail
        record = _record(root, stage, where["shard"], where["offset"])
        assert record["__seq__"] == seq
        assert line.startswith(record["date"] + ",")  # the CSV line is this record
        assert where["shard_seq_first"] <= seq <= where["shard_seq_last"]
    epochs = _manifest(root, "model")["epochs"]
    batches = epochs[0]["batches"]
    batch = places["batches"].detail["batch"]
    assert batches[batch]["first"] <= seq <= batches[batch]["last"]
    plan = _manifest(root, "batches")["plan"]
    first_example = plan["window"]["length"] + plan["window"]["label_offset"] - 1
    if seq <= batches[-1]["last"]:  # in the training split: batches of 32 from the first label
        assert batch == (seq - first_example) // plan["batch_size"]
        # the batch's step in every epoch
        assert places["model"].detail["steps"] == [
            batch + 1 + epoch * len(batches) for epoch in range(len(epochs))]
        assert places["model"].detail["steps_per_epoch"] == len(batches)


def test_lookup_of_a_seq_past_the_input_says_so_in_one_line(root):
    done = seqline("lookup", DEMO_RUN, "5000", "--root", str(root))
    assert done.returncode == 1
    assert done.stdout.strip().splitlines() == [
        f"seq 5,000 in {DEMO_RUN}: stage 'read': out of range: the run read 1,461 records "
        "(seq 0-1460)"]


def test_lookup_of_a_window_input_names_no_batch(root):
    places = {p.stage: p for p in lookup_seq(root, DEMO_RUN, 5).stages}
    assert places["features"].found and not places["batches"].found
    assert "window input" in places["batches"].line


@pytest.mark.parametrize(("args", "message"), [
    ([DEMO_RUN, "x"], "'x' is not a seq"),
    ([DEMO_RUN, "-1"], "seq counts from 0"),
    (["nosuch", "1"], "no run 'nosuch'"),
])
def test_lookup_errors_exit_2_in_one_line(root, args, message):
    done = seqline("lookup", "--root", str(root), "--", *args)  # "--": -1 is no option
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr


def test_lookup_json_is_the_function(root):
    done = seqline("lookup", DEMO_RUN, "100", "--root", str(root), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(
        lookup_seq(root, DEMO_RUN, 100).as_json()))


def test_lookup_page_over_http(root, server):
    page = httpx.get(f"{server.url}/runs/{DEMO_RUN}/lookup", params={"seq": "100"})
    assert page.status_code == 200
    for place in lookup_seq(root, DEMO_RUN, 100).stages:
        assert place.line in page.text
    assert httpx.get(f"{server.url}/runs/{DEMO_RUN}/lookup").status_code == 200  # the form
    assert httpx.get(f"{server.url}/runs/{DEMO_RUN}/lookup?seq=x").status_code == 400
    assert httpx.get(server.url + "/runs/nosuch/lookup?seq=1").status_code == 404
    gone = httpx.get(f"{server.url}/runs/{DEMO_RUN}/lookup?seq=5000").text
    assert "out of range" in gone


# A bad row (seq 2, line 4) and a filter that keeps even seq: both fates, named in one line.
SMALL = """\
name: small
errors: {max_fraction: 0.5}
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], schema: {x: int64}}}
  - {name: write, component: tfrecord_write, params: {shard_records: 3}}
  - {name: evens, component: preprocess, params: {fn: "latency:keep_even"}}
"""


@pytest.fixture(scope="module")
def small_root(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("small")
    (folder / "in.csv").write_text("x\n0\n1\nnot a number\n3\n\n4\n")
    shutil.copy(USERFNS / "latency.py", folder / "latency.py")
    (folder / "small.yaml").write_text(SMALL)
    done = seqline("-q", "run", str(folder / "small.yaml"), "--root", str(folder / "root"),
                   "--run-id", "small")
    assert done.returncode == 0, done.stderr
    return folder / "root"


def test_lookup_names_a_dead_letter_and_a_filtered_record(small_root):
    bad = seqline("lookup", "small", "2", "--root", str(small_root))
    assert bad.returncode == 1
    assert bad.stdout.splitlines() == [f"seq 2 in small: stage 'read': dead-lettered: "
                                       f"{_reason(small_root)} "
                                       f"({small_root.parent / 'in.csv'}, line 4, seq 2)"]
    odd = {p.stage: p for p in lookup_seq(small_root, "small", 3).stages}
    where = odd["write"].detail
    m = json.loads((small_root / "runs/small/write/manifest.json").read_text())
    records = decode(read_shard(small_root / "runs/small/write" / where["shard"],
                                m["compression"]), schema_from_text(m["schema"]))
    assert records.column("__seq__")[where["offset"]].as_py() == 3
    assert not odd["evens"].found and odd["evens"].detail["fate"] == "filtered"
    # an empty line is no record: seq 4 is line 7
    assert lookup_seq(small_root, "small", 4).stages[0].detail["source_line"] == 7


def _reason(root: Path) -> str:
    letters = (root / "runs/small/read/dead_letters.jsonl").read_text().splitlines()
    return str(json.loads(letters[0])["reason"])


def test_lookup_through_a_damaged_shard_names_it_and_answers_for_the_other_stages(small_root,
                                                                                 tmp_path):
    """A shard that cannot be read is said on its stage's row, in one line (it was a
    traceback from the command and a 500 from the dashboard's page, which reads the same)."""
    root = tmp_path / "root"
    shutil.copytree(small_root, root)
    shard = lookup_seq(root, "small", 3).stages[1].detail["shard"]
    path = root / "runs/small/write" / shard
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    done = seqline("lookup", "small", "3", "--root", str(root))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = {p.stage: p for p in lookup_seq(root, "small", 3).stages}
    assert not rows["write"].found and rows["write"].detail["fate"] == "unreadable"
    assert rows["write"].line.startswith(f"{shard} cannot be read (")
    assert rows["read"].found and rows["evens"].detail["fate"] == "filtered"
    assert rows["write"].line.split(" (")[0] in " ".join(done.stdout.split())
