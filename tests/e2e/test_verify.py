"""`seqline verify` on a real run, and on copies of it with one fault planted in each."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil

import httpx
import pytest
from typer.testing import CliRunner

from seqline.orchestration.cli import app
from seqline.pipeline import tfrecord
from tests.conftest import USERFNS
from tests.dashboard.conftest import Server

PIPELINE = """\
name: t
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 4}}
  - {name: write, component: tfrecord_write, params: {shard_records: 5}}
  - {name: evens, component: preprocess, params: {fn: "latency:keep_even"}}
"""


@pytest.fixture(scope="module")
def good_root(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verify")
    (folder / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(23)))
    shutil.copy(USERFNS / "latency.py", folder / "latency.py")
    (folder / "p.yaml").write_text(PIPELINE)
    result = CliRunner().invoke(app, ["run", str(folder / "p.yaml"), "--root",
                                      str(folder / "root"), "--run-id", "r"])
    assert result.exit_code == 0, result.output
    return folder / "root"


@pytest.fixture
def root(good_root, tmp_path):
    shutil.copytree(good_root, tmp_path / "root")
    return tmp_path / "root"


def _verify(root):
    return CliRunner().invoke(app, ["verify", "r", "--root", str(root)])


def _edit_manifest(root, stage, edit):
    path = root / "runs/r" / stage / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def _rewrite_shard(root, stage, index, edit_records):
    """Replace a shard's records and fix its bytes and checksum in the manifest, so only the
    contract checks (not the checksum) can tell."""
    stage_dir = root / "runs/r" / stage
    manifest = json.loads((stage_dir / "manifest.json").read_text())
    shard = manifest["shards"][index]
    records = edit_records(tfrecord.read_shard(stage_dir / shard["path"], "gzip"))
    data = gzip.compress(tfrecord.frame(records), mtime=0)
    (stage_dir / shard["path"]).write_bytes(data)
    shard["bytes"], shard["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (stage_dir / "manifest.json").write_text(json.dumps(manifest))


def test_verify_a_good_run_exits_0_with_a_row_per_stage(root):
    result = _verify(root)
    assert result.exit_code == 0, result.output
    for row in ("read", "write", "evens"):
        assert row in result.output
    assert "All artifacts hold the ordering contract." in result.output


def _swap_shards(root):
    _edit_manifest(root, "write", lambda m: m["shards"].insert(0, m["shards"].pop(1)))


def _drop_record(root):
    _rewrite_shard(root, "write", 2, lambda records: records[:2] + records[3:])


def _duplicate_record(root):
    _rewrite_shard(root, "write", 1, lambda records: records[:2] + records[1:])


def _flip_a_byte(root):
    path = root / "runs/r/evens/shard-000001.tfrecord.gz"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


FAULTS = [
    ("swapped shards", _swap_shards,
     r"write: shard order: shard 1 \(shard-000000\.tfrecord\.gz, seq 0\.\.4\) comes after seq 9"),
    ("missing record", _drop_record,
     r"write: shard 2 \(shard-000002\.tfrecord\.gz\): 4 records, manifest says 5"),
    ("duplicated record", _duplicate_record, r"write: order: seq 6 repeated after seq 6"),
    ("changed bytes", _flip_a_byte,
     r"evens: shard 1 \(shard-000001\.tfrecord\.gz\): checksum differs from the manifest's"),
]


@pytest.mark.parametrize(("plant", "message"), [f[1:] for f in FAULTS], ids=[f[0] for f in FAULTS])
def test_verify_catches_a_planted_fault(root, plant, message):
    plant(root)
    result = _verify(root)
    assert result.exit_code == 1, result.output
    assert _matches(message, result.output), result.output
    assert "break the contract" in result.output


def test_verify_a_missing_record_is_caught_by_coverage_even_with_the_counts_fixed(root):
    _drop_record(root)
    _edit_manifest(root, "write", lambda m: m["shards"][2].update(records=4))
    result = _verify(root)
    assert result.exit_code == 1
    assert _matches(r"write: count: 22 records stored, manifest says 23", result.output)
    assert _matches(r"write: seq digest: the stored seq stream is not the one", result.output)
    assert _matches(r"write: coverage: 1 input records are neither output nor dead letters",
                    result.output)


def _plant_gaps_and_duplicates(root):
    """write's shards hold seq 0..4, 5..9, 10..14, 15..19, 20..22 (5 a shard): seq 6 twice,
    11 and 12 gone, 16 and 17 twice and 18 and 19 gone."""
    _rewrite_shard(root, "write", 1, lambda r: r[:2] + r[1:])
    _rewrite_shard(root, "write", 2, lambda r: r[:1] + r[3:])
    _rewrite_shard(root, "write", 3, lambda r: r[:1] + [r[1], r[1], r[2], r[2]])


GAPS = {"missing": {"records": 4, "intervals": 2, "first": [[11, 12], [18, 19]]},
        "duplicated": {"records": 3, "intervals": 2, "first": [[6, 6], [16, 17]]}}


def test_verify_names_every_missing_and_duplicated_range(root):
    _plant_gaps_and_duplicates(root)
    result = _verify(root)
    assert result.exit_code == 1, result.output
    assert _matches(r"write: gaps: 4 seq missing in 2 ranges: 11\.\.12, 18\.\.19", result.output)
    assert _matches(r"write: duplicates: 3 extra records of seq in 2 ranges: 6, 16\.\.17",
                    result.output), result.output
    as_json = CliRunner().invoke(app, ["verify", "r", "--root", str(root), "--json"])
    assert as_json.exit_code == 1
    stages = {c["stage"]: c for c in json.loads(as_json.stdout)["stages"]}
    assert stages["write"]["gaps"] == GAPS
    assert stages["read"]["gaps"] == {}
    saved = json.loads((root / "runs/r/verify.json").read_text())  # the dashboard's copy
    assert {c["stage"]: c["gaps"] for c in saved["stages"]}["write"] == GAPS


def test_a_stage_page_shows_the_gap_finders_intervals(root):
    _plant_gaps_and_duplicates(root)
    assert _verify(root).exit_code == 1
    server = Server(root)
    try:
        page = httpx.get(server.url + "/runs/r/stages/write").text
        good = httpx.get(server.url + "/runs/r/stages/read").text
    finally:
        server.stop()
    for kind, shown in (("missing", [("11", "12"), ("18", "19")]),
                        ("duplicated", [("6", "6"), ("16", "17")])):
        table = page.split(f'class="gaps gaps-{kind}"')[1].split("</table>")[0]
        rows = re.findall(r'lookup\?seq=\d+">([\d,]+)</a></td><td class="num">([\d,]+)<', table)
        assert rows == shown, table
    assert "breaks the ordering contract" in page
    assert "holds the ordering contract" in good and "gaps-" not in good


def test_verify_unknown_run_exits_2(root):
    result = CliRunner().invoke(app, ["verify", "nope", "--root", str(root)])
    assert result.exit_code == 2
    assert "no run 'nope'" in result.output


def _matches(pattern: str, text: str) -> bool:
    return re.search(pattern, " ".join(text.split())) is not None
