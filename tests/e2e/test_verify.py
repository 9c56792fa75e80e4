"""`seqline verify` on a real run, and on copies of it with one fault planted in each."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil

import pytest
from typer.testing import CliRunner

from seqline.orchestration.cli import app
from seqline.pipeline import tfrecord
from tests.conftest import USERFNS

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


def test_verify_unknown_run_exits_2(root):
    result = CliRunner().invoke(app, ["verify", "nope", "--root", str(root)])
    assert result.exit_code == 2
    assert "no run 'nope'" in result.output


def _matches(pattern: str, text: str) -> bool:
    import re

    return re.search(pattern, " ".join(text.split())) is not None
