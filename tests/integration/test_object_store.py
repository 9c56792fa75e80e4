"""An object store as the artifact root: the same bytes as a local root, commits that hold.

The root is a bucket on moto's S3 server (tests/s3.py), reached through s3fs the way real S3
is, credentials from the environment. The data stages run on the local runner and on Beam's
FnApiRunner; the shards, manifests' checksums and batching's plan must equal those of the same
run on a local root. Faults: a stage that fails, a worker killed on every attempt, objects an
abandoned or zombie attempt left behind: none of them is ever trusted by a reader, `verify`,
resume or the cache (pipeline/artifacts.py: the manifest, written last, is the commit).
The artifact protocol itself runs on a local root and on S3 alike in test_storage.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil

import pytest
from typer.testing import CliRunner

from seqline.components import COMPONENTS
from seqline.orchestration.api import execute, run_pipeline
from seqline.orchestration.cli import app
from seqline.orchestration.runners import make_runner
from seqline.orchestration.verify import verify_run
from seqline.pipeline.artifacts import MANIFEST, read_manifest
from seqline.pipeline.config import load_pipeline, parse_pipeline
from seqline.pipeline.storage import Folder, fspath, open_root, storage_of
from seqline.pipeline.tfrecord import read_artifact
from tests.conftest import REPO, USERFNS
from tests.s3 import s3_root, s3_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration

EXAMPLE = REPO / "data" / "seattle_weather" / "pipeline.yaml"
DATA_STAGES = ["read", "examples", "features", "batches"]
RUNNERS = {"local": {}, "beam": {"mode": "multi_processing"}}


def _example(stages: int = 4, **train: object):
    spec = load_pipeline(EXAMPLE, COMPONENTS)
    chosen = list(spec.stages[:stages])
    for i, stage in enumerate(chosen):
        if stage.component == "train" and train:
            chosen[i] = dataclasses.replace(
                stage, params=stage.params.model_copy(update=train))
    return dataclasses.replace(spec, stages=tuple(chosen))


def _stored(stage_dir) -> dict:
    """What a stage committed that must not depend on the root: shards (by their bytes),
    dead letters, seq range, digest, and batching's plan."""
    m = read_manifest(stage_dir)
    shards = [{k: s[k] for k in ("records", "bytes", "sha256", "seq_first", "seq_last")}
              for s in m.get("shards") or []]
    for shard, entry in zip(shards, m.get("shards") or [], strict=True):
        data = (stage_dir / entry["path"]).read_bytes()
        shard["read_back"] = hashlib.sha256(data).hexdigest()
    keep = ("records_in", "records_out", "seq_min", "seq_max", "seq_digest", "schema", "plan",
            "train", "eval")
    return {"shards": shards, **{k: m.get(k) for k in keep}}


@pytest.fixture(scope="module")
def local_reference(tmp_path_factory):
    """The example's data stages on a local root, the answer every S3 run must give."""
    root = tmp_path_factory.mktemp("local-root")
    with make_runner("local", workers=2) as runner:
        run_pipeline(_example(), runner, root, "ref")
    return {s: _stored(root / "runs" / "ref" / s) for s in DATA_STAGES}


@pytest.mark.parametrize("runner", list(RUNNERS))
def test_data_stages_on_s3_equal_a_local_root_byte_for_byte(local_reference, s3_root, runner):  # noqa: F811
    root = open_root(s3_root)
    assert fspath(root).startswith("s3://")
    with make_runner(runner, workers=2, **RUNNERS[runner]) as engine:
        run_pipeline(_example(), engine, root, "s3run")
    stored = {s: _stored(root / "runs" / "s3run" / s) for s in DATA_STAGES}
    assert stored == local_reference
    assert len(stored["features"]["shards"]) == 6
    assert all(s["read_back"] == s["sha256"] for s in stored["features"]["shards"])
    checks = verify_run(s3_root, "s3run")
    assert [(c.stage, c.records, c.ok) for c in checks] == [
        (s, 1461, True) for s in DATA_STAGES]
    verdict = json.loads((root / "runs" / "s3run" / "verify.json").read_text())
    assert verdict["ok"] is True


FAULTS = """\
name: faults
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [CSV], block_records: 100}}
  - {name: write, component: tfrecord_write, params: {shard_records: 100}}
  - {name: features, component: preprocess, params: {fn: "latency:FN", fn_kwargs: {KW}}}
"""


def _faults(csv, fn: str, kwargs: str = ""):
    text = FAULTS.replace("CSV", str(csv)).replace("FN", fn).replace("KW", kwargs)
    return parse_pipeline(text, USERFNS, COMPONENTS)


@pytest.fixture
def numbers(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("x\n" + "".join(f"{i}\n" for i in range(1000)))
    return path


def _objects(root: Folder, *parts: str) -> list[str]:
    place = root
    for part in parts:
        place = place / part
    return sorted(storage_of(place).files(place))


def test_a_worker_killed_on_every_attempt_leaves_nothing_trusted(s3_root, numbers, tmp_path,  # noqa: F811
                                                                 monkeypatch):
    """die_at SIGKILLs the worker holding seq 550 on every attempt: the stage fails after
    other blocks' shards reached the bucket. No manifest is written, so verify, the run
    store and resume trust none of them; abandoning the stage removes them."""
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))
    root = open_root(s3_root)
    assert fspath(root).startswith("s3://")
    failed = execute(_faults(numbers, "die_at", "seq: 550"), root=s3_root, run_id="poisoned",
                     raise_on_error=False, verify=False, workers=2)
    assert failed.status == "failed"
    assert not (root / "runs" / "poisoned" / "features" / MANIFEST).exists()
    # Abandoning the stage removed what was there, but workers still in flight may have
    # written shards since (how many is a matter of timing): no manifest lists them, and
    # resume removes the whole prefix before running the stage again (checked below).
    assert [(c.stage, c.problems) for c in verify_run(s3_root, "poisoned")] == [
        ("read", []), ("write", []), ("features", ["no committed output: the run failed."])]

    # What a SIGKILLed driver leaves: a stage prefix with shards and no manifest; and in a
    # committed stage, a zombie attempt's shard that its manifest does not list.
    garbage = b"half a shard from an attempt nobody committed"
    (root / "runs" / "poisoned" / "features" / "shard-000003-dead0000.tfrecord.gz") \
        .write_bytes(garbage)
    write = root / "runs" / "poisoned" / "write"
    (write / "shard-000002-zombie00.tfrecord.gz").write_bytes(garbage)

    resumed = execute(_faults(numbers, "double"), root=s3_root, run_id="poisoned",
                      resume=True, workers=2)
    assert resumed.status == "succeeded" and resumed.verified
    features = read_manifest(root / "runs" / "poisoned" / "features")
    assert _objects(root, "runs", "poisoned", "features") == sorted(
        [MANIFEST, features["profile"]["path"], *(s["path"] for s in features["shards"])]
    )  # every leftover is gone: what is there, the manifest names
    listed = {s["path"] for s in read_manifest(write)["shards"]}
    assert "shard-000002-zombie00.tfrecord.gz" not in listed
    records = [b.num_rows for b in read_artifact(write, read_manifest(write))]
    assert sum(records) == 1000

    with make_runner("local", workers=2) as engine:  # the undisturbed answer, local root
        run_pipeline(_faults(numbers, "double"), engine, tmp_path / "local", "calm")
    for stage in ("write", "features"):
        assert _stored(root / "runs" / "poisoned" / stage) == \
            _stored(tmp_path / "local" / "runs" / "calm" / stage)


def test_resume_after_a_failed_stage_on_s3(s3_root, numbers, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))
    failed = execute(_faults(numbers, "boom_at", "seq: 420"), root=s3_root, run_id="again",
                     raise_on_error=False, verify=False)
    assert failed.status == "failed"
    root = open_root(s3_root)
    assert fspath(root).startswith("s3://")
    before = read_manifest(root / "runs" / "again" / "write")
    resumed = execute(_faults(numbers, "double"), root=s3_root, run_id="again", resume=True)
    assert resumed.verified
    assert [r.status for r in resumed.stages] == ["kept", "kept", "succeeded"]
    assert read_manifest(root / "runs" / "again" / "write") == before  # kept, not redone
    assert read_manifest(root / "runs" / "again" / "features")["records_out"] == 1000


def test_cache_hit_on_s3_copies_server_side(s3_root, numbers, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))
    spec = _faults(numbers, "double")
    first = execute(spec, root=s3_root, run_id="first")
    second = execute(spec, root=s3_root, run_id="second")
    assert [r.cached_from for r in second.stages] == [None, "first", "first"] or \
        [r.cached_from for r in second.stages] == ["first", "first", "first"]
    assert second.verified and first.verified
    root = open_root(s3_root)
    assert fspath(root).startswith("s3://")
    for stage in ("write", "features"):
        assert _stored(root / "runs" / "second" / stage) == \
            _stored(root / "runs" / "first" / stage)
    # the store is local (an object store holds no database), named after the root
    assert list((tmp_path / "home" / "stores").glob("s3-test-*-root.db"))


def test_train_and_evaluate_reach_the_root(s3_root, tmp_path, monkeypatch):  # noqa: F811
    """TensorFlow writes the model into a local staging folder; the commit uploads it before
    the manifest, and evaluate reads it back from the bucket."""
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))
    result = execute(_example(6, epochs=1), root=s3_root, run_id="full")
    assert result.verified
    root = open_root(s3_root)
    assert fspath(root).startswith("s3://")
    model = read_manifest(root / "runs" / "full" / "model")
    assert "model.keras" in model["uploaded"]
    stored = storage_of(root).files(root / "runs" / "full" / "model")
    assert all(stored[name] == size for name, size in model["uploaded"].items())
    evaluation = read_manifest(root / "runs" / "full" / "evaluation")
    assert set(evaluation["metrics"]) == {"mae", "rmse"}


@pytest.mark.parametrize(("root", "says"), [
    ("s3://AKIAXXXX:secret@bucket/root", "carries credentials"),
    ("nosuch://bucket/root", "unknown scheme 'nosuch'"),
    ("gs://bucket/root", "needs a package that is not installed"),
    ("s3://no-such-bucket-seqline/root", "bucket s3://no-such-bucket-seqline does not exist"),
    # (s3fs's exists() says False for these: they read as a missing bucket)
    ("profile=nosuch s3://bucket/root", "cannot reach s3://bucket: ProfileNotFound: The config "
                                        "profile (nosuch) could not be found"),
    ("endpoint=http://127.0.0.1:1 s3://bucket/root", "cannot reach s3://bucket: "
                                                     "EndpointConnectionError"),
])
def test_a_bad_root_exits_2_before_anything_runs(s3_server, tmp_path, monkeypatch, request,  # noqa: F811
                                                 root, says):
    pytest.importorskip("s3fs")
    if " " in root:  # the environment the root is read in
        setting, root = root.split(" ")
        name, value = setting.split("=")
        monkeypatch.setenv({"profile": "AWS_PROFILE", "endpoint": "AWS_ENDPOINT_URL"}[name],
                           value)
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # (botocore's retries: seconds each)
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()  # (else the session's, with its endpoint)
        request.addfinalizer(s3fs.S3FileSystem.clear_instance_cache)  # (nor this one after)
    if root.startswith("gs://"):
        try:
            import gcsfs  # noqa: F401
            pytest.skip("gcsfs is installed: gs:// is a valid root here")
        except ImportError:
            pass
    result = CliRunner().invoke(app, ["run", str(EXAMPLE), "--root", root])
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "secret" not in result.output
    assert not (tmp_path / "s3:").exists()


def test_the_cli_runs_lists_shows_verifies_and_rebuilds_on_s3(s3_root, numbers, tmp_path,  # noqa: F811
                                                              monkeypatch):
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))
    shutil.copy(USERFNS / "latency.py", tmp_path)
    text = FAULTS.replace("CSV", str(numbers)).replace("FN", "double").replace("KW", "")
    (tmp_path / "pipeline.yaml").write_text(text)
    cli = CliRunner()
    ran = cli.invoke(app, ["run", str(tmp_path / "pipeline.yaml"), "--root", s3_root,
                           "--run-id", "viacli"])
    assert ran.exit_code == 0, ran.output
    assert f"{s3_root}/runs/viacli" in ran.output
    listed = cli.invoke(app, ["runs", "list", "--root", s3_root, "--json"])
    assert [r["run_id"] for r in json.loads(listed.output)] == ["viacli"]
    shown = json.loads(cli.invoke(app, ["runs", "show", "viacli", "--root", s3_root,
                                        "--json"]).output)
    uris = [a["uri"] for s in shown["stages"] for a in s["artifacts"] if a["role"] == "output"]
    assert uris and all(u.startswith(f"{s3_root}/runs/viacli/") for u in uris)
    assert "testing" not in json.dumps(shown)  # the key and secret in the environment
    checked = cli.invoke(app, ["verify", "viacli", "--root", s3_root])
    assert checked.exit_code == 0, checked.output
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "other-home"))  # a lost store
    rebuilt = cli.invoke(app, ["store", "rebuild", "--root", s3_root])
    assert rebuilt.exit_code == 0 and "indexed 1 run(s)" in rebuilt.output, rebuilt.output
