"""Storage and artifacts on a local root and on S3 alike: writes, commits, links, dead letters.

Every test runs twice, on a local folder and on a bucket of moto's S3 server (tests/s3.py),
through the same code: what differs between them is storage.py's business alone.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from seqline.orchestration.cache import artifact_checksum, damage
from seqline.pipeline.artifacts import (
    MANIFEST,
    StageArtifact,
    committed_stages,
    link_stage,
    read_manifest,
)
from seqline.pipeline.deadletters import DeadLetter, DeadLetterFile, read_dead_letters
from seqline.pipeline.errors import ConfigError
from seqline.pipeline.storage import (
    Folder,
    fspath,
    open_root,
    scratch,
    seqline_home,
    storage_of,
    write_json,
)
from seqline.pipeline.tfrecord import ShardSink, read_artifact, schema_to_text
from tests.s3 import s3_root, s3_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path, monkeypatch) -> Folder:
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))
    if request.param == "local":
        return tmp_path / "root"
    return open_root(request.getfixturevalue("s3_root"))


def _names(place: Folder) -> list[str]:
    return sorted(storage_of(place).files(place))


def _shards(artifact: StageArtifact, n: int) -> list[dict]:
    """`n` shards of 10 records each, written as the workers write them."""
    sink = ShardSink(fspath(artifact.path), "gzip")
    return [sink(i, pa.record_batch({"x": pa.array(range(10 * i, 10 * i + 10), pa.int64()),
                                     "__seq__": pa.array(range(10 * i, 10 * i + 10),
                                                         pa.int64())}))[1]
            for i in range(n)]


def _manifest(shards: list[dict], **more) -> dict:
    schema = pa.schema([pa.field("x", pa.int64()), pa.field("__seq__", pa.int64())])
    return {"stage": "write", "shards": shards, "compression": "gzip",
            "schema": schema_to_text(schema), **more}


def test_storage_write_json_replaces_a_file_whole(root):
    place = root / "runs" / "r" / "run.json"
    place.parent.mkdir(parents=True, exist_ok=True)  # a local file's folder must exist
    write_json(place, {"status": "running"})
    write_json(place, {"status": "succeeded", "a": 1})
    assert json.loads(place.read_text()) == {"a": 1, "status": "succeeded"}
    assert _names(root / "runs" / "r") == ["run.json"]  # no temporary file left behind


def test_storage_files_entries_and_remove(root):
    storage = storage_of(root)
    for name, data in [("a/one", b"1"), ("a/sub/two", b"22"), ("b/three", b"333")]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        storage.write_atomically(root / name, data)
    assert storage.files(root) == {"a/one": 1, "a/sub/two": 2, "b/three": 3}
    assert [p.name for p in storage.entries(root)] == ["a", "b"]
    storage.remove(root / "a", ["one"])
    assert storage.files(root / "a") == {"sub/two": 2}
    storage.remove(root / "a")
    assert storage.files(root) == {"b/three": 3}
    assert storage.entries(root / "missing") == [] and storage.files(root / "missing") == {}


def test_storage_open_writes_at_close_and_reads_in_blocks(root):
    storage = storage_of(root)
    (root / "f").mkdir(parents=True, exist_ok=True)
    with storage.open(root / "f" / "lines.txt", "w") as f:
        f.write("one\n")
        f.write("two\n")
    with storage.open(root / "f" / "lines.txt", "rb") as f:
        assert f.read() == b"one\ntwo\n"
    with storage.open(root / "f" / "lines.txt", "rb", block_size=3) as f:
        assert [line for line in f] == [b"one\n", b"two\n"]
    modified = storage.modified(root / "f" / "lines.txt")
    assert abs(modified - datetime.now(UTC)) < timedelta(minutes=5)


def test_storage_local_copy_and_inside(root):
    storage = storage_of(root)
    (root / "m").mkdir(parents=True, exist_ok=True)
    storage.write_atomically(root / "m" / "model.keras", b"weights")
    with storage.local_copy(root / "m" / "model.keras") as local:
        assert local.read_bytes() == b"weights"
    assert storage.inside(root, "m", "model.keras") == root.resolve() / "m" / "model.keras"
    assert storage.inside(root, "m", "..", "..", "etc") is None


def test_storage_scratch_is_on_this_machine(root):
    run = root / "runs" / "r"
    place = scratch(run)
    assert storage_of(place).on_disk(place) == place
    assert place == run or place.is_relative_to(seqline_home() / "scratch")


def test_stage_artifact_commit_keeps_only_what_the_manifest_lists(root):
    """A worker killed after its shard reached the store, before its result reached the
    driver: the block ran again (under another name on an object store). The commit removes
    the shards it does not list, and keeps what it lists."""
    artifact = StageArtifact(root, "r", "write")
    storage = storage_of(artifact.path)
    for block in (0, 5):
        stray = storage.attempt_name(f"shard-{block:06d}.tfrecord.gz")
        storage.write_atomically(artifact.path / stray, b"a worker killed after its upload")
    shards = _shards(artifact, 2)
    storage.write_atomically(artifact.path / "dead_letters.jsonl", b"{}\n")
    committed = artifact.commit(_manifest(shards, dead_letters={"path": "dead_letters.jsonl"}))
    assert _names(committed) == sorted([MANIFEST, "dead_letters.jsonl",
                                        *(s["path"] for s in shards)])
    assert [d.name for d in committed_stages(root / "runs" / "r")] == ["write"]
    assert sum(b.num_rows for b in read_artifact(committed, read_manifest(committed))) == 20
    with pytest.raises(ConfigError, match="already has a committed stage 'write'"):
        StageArtifact(root, "r", "write")


def test_stage_artifact_abandoned_leaves_nothing(root):
    artifact = StageArtifact(root, "r", "write")
    _shards(artifact, 2)
    (artifact.out_dir / "model.keras").write_bytes(b"half a model")
    artifact.abandon()
    assert _names(root / "runs" / "r") == []
    assert not artifact.out_dir.exists()
    # A worker still running writes its shard late: it fails, or (an object store, where no
    # folder can be gone) leaves an object no manifest lists; never a temporary folder again.
    with contextlib.suppress(OSError):
        _shards(artifact, 1)
    run = root / "runs" / "r"
    assert [p.name for p in storage_of(run).entries(run) if p.name.startswith(".")] == []
    assert not (artifact.final / MANIFEST).exists()


def test_stage_artifact_a_driver_stages_local_files_reach_the_root(root):
    artifact = StageArtifact(root, "r", "model")
    (artifact.out_dir / "saved_model").mkdir()
    (artifact.out_dir / "saved_model" / "saved_model.pb").write_bytes(b"graph")
    (artifact.out_dir / "model.keras").write_bytes(b"weights")
    committed = artifact.commit({"stage": "model"})
    assert (committed / "saved_model" / "saved_model.pb").read_bytes() == b"graph"
    assert _names(committed) == [MANIFEST, "model.keras", "saved_model/saved_model.pb"]
    uploaded = read_manifest(committed).get("uploaded")
    assert uploaded in (None, {"model.keras": 7, "saved_model/saved_model.pb": 5})
    checksum = artifact_checksum(committed)
    assert checksum == artifact_checksum(committed) and damage(committed, checksum) is None


def test_link_stage_shares_a_committed_stage_with_another_run(root):
    artifact = StageArtifact(root, "first", "write")
    committed = artifact.commit(_manifest(_shards(artifact, 3)))
    target = root / "runs" / "second" / "write"
    target.parent.mkdir(parents=True, exist_ok=True)
    link_stage(committed, target)
    assert read_manifest(target) == read_manifest(committed)
    assert _names(target) == _names(committed)
    assert artifact_checksum(target) == artifact_checksum(committed)
    # no temporary left beside the link (the run's folder holds the stage's files only)
    assert _names(root / "runs" / "second") == [f"write/{n}" for n in _names(committed)]


def test_artifact_checksum_finds_a_changed_shard(root):
    artifact = StageArtifact(root, "r", "write")
    shards = _shards(artifact, 2)
    committed = artifact.commit(_manifest(shards))
    checksum = artifact_checksum(committed, {s["path"]: s["sha256"] for s in shards})
    assert checksum == artifact_checksum(committed) and damage(committed, checksum) is None
    storage_of(committed).write_atomically(committed / shards[1]["path"], b"flipped")
    assert "changed since it was committed" in damage(committed, checksum)


def test_dead_letters_are_named_by_the_manifest_and_read_back(root):
    artifact = StageArtifact(root, "r", "read")
    letters = DeadLetterFile(artifact.path)
    assert letters.close() is None  # nothing set aside: no file
    letters = DeadLetterFile(artifact.path)
    bad = [DeadLetter(3, "not a number", "in.csv", 5, "x,y"), DeadLetter(8, "too long")]
    letters.add(bad)
    entry = letters.close()
    assert entry is not None and entry["count"] == 2
    committed = artifact.commit({"stage": "read", "dead_letters": entry})
    assert read_dead_letters(committed, read_manifest(committed)) == bad
    assert entry["path"] in _names(committed)


# Written by a process of its own under strace: shards as workers write them, then the commit.
_COMMIT_SCRIPT = """
import sys
from pathlib import Path
import pyarrow as pa
from seqline.pipeline.artifacts import StageArtifact
from seqline.pipeline.tfrecord import ShardSink
artifact = StageArtifact(Path(sys.argv[1]), "r", "write")
sink = ShardSink(str(artifact.path), "gzip")
shards = [sink(i, pa.record_batch({"__seq__": pa.array([i], pa.int64())}))[1] for i in range(3)]
artifact.commit({"stage": "write", "shards": shards})
"""


def test_a_commit_puts_what_its_manifest_lists_on_disk_before_the_manifest(tmp_path):
    """Workers write shards without waiting for the disk (an fsync each stalled them ~1 ms),
    only asking it to start writing them (sync_file_range: then the commit waits less); the
    commit fsyncs every file its manifest lists, then writes the manifest: strace's record of
    the process's syscalls (-y: each fd's path), in order."""
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is not installed (`make test` installs it)")
    trace = tmp_path / "trace.txt"
    subprocess.run([strace, "-f", "-qq", "-y", "-o", str(trace), "-e",
                    "trace=fsync,sync_file_range,rename,renameat,renameat2", sys.executable, "-c",
                    _COMMIT_SCRIPT, str(tmp_path / "root")], check=True, timeout=120)
    lines = trace.read_text().splitlines()
    manifest_named = next(i for i, line in enumerate(lines)
                          if "rename" in line and line.rstrip().endswith(("/manifest.json>, 0) = 0",
                                                                           '/manifest.json") = 0')))
    synced = {re.search(r"/(shard-\d+\.tfrecord\.gz)>", line).group(1)
              for line in lines[:manifest_named]
              if re.search(r"fsync\(\d+</[^>]*/shard-\d+\.tfrecord\.gz>", line)}
    assert synced == {f"shard-{i:06d}.tfrecord.gz" for i in range(3)}
    # and the workers' own writes did not wait: no fsync of a shard's temporary file
    assert not [line for line in lines if re.search(r"fsync\(\d+<[^>]*\.tmp-\d+>", line)
                and "shard-" in line]
    started = [line for line in lines[:manifest_named]
               if re.search(r"sync_file_range\(\d+<[^>]*/\.shard-\d+\.tfrecord\.gz\.tmp-\d+>, "
                            r"0, 0, SYNC_FILE_RANGE_WRITE\) = 0", line)]
    assert len(started) == 3, lines


def test_a_commit_refuses_to_vouch_for_a_listed_file_that_is_not_there(tmp_path):
    artifact = StageArtifact(tmp_path / "root", "r", "write")
    shards = _shards(artifact, 2)
    missing = {**shards[1], "path": "shard-000007.tfrecord.gz"}
    with pytest.raises(FileNotFoundError, match="shard-000007.tfrecord.gz"):
        artifact.commit(_manifest([shards[0], missing]))
    assert not (artifact.final / MANIFEST).exists()
