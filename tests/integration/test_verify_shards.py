"""verify's shard reading on a local root and on S3: damaged shards named as the exact reader
names them, whichever of the two readers (seq_scan or the decoder) took the shard.

Every test runs twice, on a local folder and on a bucket of moto's S3 server (tests/s3.py).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json

import pytest
from typer.testing import CliRunner

from seqline.orchestration.cli import app
from seqline.orchestration.shard_reads import ShardReads
from seqline.orchestration.verify import verdict, verify_run
from seqline.pipeline.artifacts import VERDICT, read_manifest
from seqline.pipeline.storage import Folder, open_root, write_json
from seqline.pipeline.tfrecord import CorruptRecord, frame, iter_records
from tests.s3 import s3_root, s3_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration

PIPELINE = """\
name: t
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [in.csv], block_records: 4}}
  - {name: write, component: tfrecord_write, params: {shard_records: 5}}
  - {name: more, component: preprocess, params: {fn: "plus:add_y", compression: none}}
"""
USER_FN = """\
import pyarrow.compute as pc


def add_y(batch):
    return batch.append_column("y", pc.multiply(batch.column("x"), 2))
"""


@pytest.fixture(params=["local", "s3"])
def run(request, tmp_path, monkeypatch) -> Folder:
    """A committed, verified run "r" (23 records, shards of 5); its folder."""
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))
    (tmp_path / "in.csv").write_text("x,s\n" + "".join(f"{i},v{i}\n" for i in range(23)))
    (tmp_path / "plus.py").write_text(USER_FN)
    (tmp_path / "p.yaml").write_text(PIPELINE)
    root = str(tmp_path / "root") if request.param == "local" else \
        request.getfixturevalue("s3_root")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(app, ["run", str(tmp_path / "p.yaml"), "--root", root,
                                      "--run-id", "r"])
    assert result.exit_code == 0, result.output
    return open_root(root) / "runs" / "r"


def _problems(run: Folder) -> list[str]:
    checks = verify_run(run.parent.parent, "r")
    saved = json.loads((run / VERDICT).read_text())
    assert saved == verdict(checks)
    return [f"{c.stage}: {p}" for c in checks for p in c.problems]


def _framed(run: Folder, stage: str, index: int) -> bytes:
    shard = read_manifest(run / stage)["shards"][index]
    data = (run / stage / shard["path"]).read_bytes()
    return gzip.decompress(data) if shard["path"].endswith(".gz") else data


def _store(run: Folder, stage: str, index: int, framed: bytes, fix_manifest: bool = True) -> str:
    """Write a shard's new framed bytes (the manifest's bytes and sha256 fixed, so only the
    framing and contract checks can tell); the error the exact reader gives for them, if any."""
    manifest = read_manifest(run / stage)
    shard = manifest["shards"][index]
    path = run / stage / shard["path"]
    data = gzip.compress(framed, mtime=0) if shard["path"].endswith(".gz") else framed
    path.write_bytes(data)
    if fix_manifest:
        shard["bytes"], shard["sha256"] = len(data), hashlib.sha256(data).hexdigest()
        write_json(run / stage / "manifest.json", manifest)
    try:
        for _ in iter_records(io.BytesIO(data), str(path), manifest["compression"]):
            pass
    except CorruptRecord as exc:
        return str(exc)
    return ""


def _name(run: Folder, stage: str, index: int) -> str:
    """How verify names a shard: its index and its path (on S3 with the attempt's suffix)."""
    return f"{stage}: shard {index} ({read_manifest(run / stage)['shards'][index]['path']})"


def _records(framed: bytes) -> list[bytes]:
    return [r for chunk in iter_records(io.BytesIO(framed), "shard", "none") for r in chunk]


def test_verify_shards_a_good_run_holds_on_every_stage(run):
    assert _problems(run) == []


@pytest.mark.parametrize("stage", ["write", "more"])
def test_verify_shards_a_flipped_length_is_named_as_the_exact_reader_names_it(run, stage):
    """Even in bytes the manifest's checksum vouches for (a writer that framed them wrong),
    the lengths and their CRCs are checked. (Their data CRCs are the writer's own, computed
    over these bytes: a changed data byte is the checksum's to find, the test below.)"""
    framed = bytearray(_framed(run, stage, 1))
    second = 12 + int.from_bytes(framed[:8], "little") + 4  # record 1's length field
    framed[second] ^= 0x10
    error = _store(run, stage, 1, bytes(framed))
    assert "corrupt" in error
    assert _problems(run) == [f"{_name(run, stage, 1)}: unreadable: {error}"]


def test_verify_shards_a_truncated_shard_is_named_as_the_exact_reader_names_it(run):
    error = _store(run, "write", 2, _framed(run, "write", 2)[:-7])
    assert "truncated record 4" in error
    assert _problems(run) == [f"{_name(run, 'write', 2)}: unreadable: {error}"]


def test_verify_shards_a_changed_file_fails_its_checksum_and_its_framing(run):
    framed = bytearray(_framed(run, "more", 3))
    framed[40] ^= 0x01
    error = _store(run, "more", 3, bytes(framed), fix_manifest=False)
    name = _name(run, "more", 3)
    assert _problems(run) == [f"{name}: checksum differs from the manifest's: the bytes changed",
                              f"{name}: unreadable: {error}"]


def test_verify_shards_two_swapped_records_break_the_order(run):
    records = _records(_framed(run, "write", 1))  # seq 5..9
    assert _store(run, "write", 1, frame([records[1], records[0], *records[2:]])) == ""
    assert _problems(run) == [
        f"{_name(run, 'write', 1)}: seq 6..9, manifest says 5..9",
        "write: order: seq 5 out of order after seq 6 (record 6)",
        "write: seq digest: the stored seq stream is not the one the stage emitted (a record "
        "is missing, repeated or moved)"]


def test_verify_shards_a_record_that_is_no_example_is_named_by_the_decoder(run):
    records = _records(_framed(run, "write", 0))
    _store(run, "write", 0, frame([b"\x0a\x05no example", *records[1:]]))
    problems = _problems(run)
    assert len(problems) == 1
    assert problems[0].startswith(f"{_name(run, 'write', 0)}: unreadable: not a tf.train.Example")


def test_verify_shards_only_problems_up_to_the_first_unreadable_shard_count(run):
    """Shards are read at once; what is reported must not depend on which finished first."""
    errors = [_store(run, "write", i, _framed(run, "write", i)[:-1]) for i in (1, 3)]
    assert _problems(run) == [
        f"{_name(run, 'write', 1)}: unreadable: {errors[0]}"]


def _read_during_the_run(run: Folder, stage: str) -> ShardReads:
    """Shards of `stage` read back as `seqline run` reads them while the stage goes."""
    manifest = read_manifest(run / stage)
    reads = ShardReads()
    for i, shard in enumerate(manifest["shards"]):
        reads.read(stage, i, run / stage, shard, manifest["compression"])
    for read in list(reads._reads.values()):  # every read done, as by the run's end
        read.result()
    return reads


def test_verify_shards_read_during_the_run_are_taken_at_its_end(run):
    """A clean read made during the run is verify's read of that shard: bytes changed after
    it (after the run, then) are the next `seqline verify`'s to find, not this one's."""
    reads = _read_during_the_run(run, "more")
    framed = bytearray(_framed(run, "more", 1))
    framed[20] ^= 0x01
    _store(run, "more", 1, bytes(framed), fix_manifest=False)
    checks = verify_run(run.parent.parent, "r", reads)
    assert [p for c in checks for p in c.problems] == []
    assert _problems(run) != []  # read at the end, without the reads: found


def test_verify_shards_a_shard_damaged_before_its_read_is_named_as_a_read_at_the_end_names_it(
        run):
    framed = bytearray(_framed(run, "more", 2))
    framed[20] ^= 0x01
    _store(run, "more", 2, bytes(framed), fix_manifest=False)
    reads = _read_during_the_run(run, "more")
    checks = verify_run(run.parent.parent, "r", reads)
    found = [f"{c.stage}: {p}" for c in checks for p in c.problems]
    assert found and found == _problems(run)


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_verify_shards_a_worker_reads_back_the_shard_it_wrote(tmp_path, compression):
    """A stage's task reads each shard back in the worker that wrote it (MapTask.read_back);
    the check crosses to the driver with the result, and verify takes it as its read. A
    shard the worker cannot read cleanly is left for verify to read at the end."""
    import pickle
    from functools import partial

    import numpy as np
    import pyarrow as pa

    from seqline.orchestration.shard_reads import read_back
    from seqline.pipeline.blocks import SEQ, Block
    from seqline.pipeline.tasks import MapTask
    from seqline.pipeline.tfrecord.writing import ShardSink

    seq = np.arange(40, 140, dtype=np.int64)
    block = Block(3, pa.record_batch({"x": np.arange(100) * 0.5, SEQ: seq}))
    task = MapTask("s", lambda batch: batch, sink=ShardSink(str(tmp_path), compression),
                   read_back=partial(read_back, str(tmp_path), compression))
    result = pickle.loads(pickle.dumps(task(block)))  # as it crosses to the driver
    assert result.read is not None
    problems, found = result.read
    assert problems == [] and found is not None and found.tolist() == seq.tolist()
    reads = ShardReads()
    reads.done("s", 0, result.shard, result.read)
    taken = reads.taken("s", 0, result.shard)
    assert taken is not None and taken.tolist() == seq.tolist()

    lying = {**result.shard, "records": 99}  # a read with a problem is not taken
    reads.done("s", 1, lying, read_back(str(tmp_path), compression, lying))
    assert reads.taken("s", 1, lying) is None
