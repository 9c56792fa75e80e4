"""Every user-facing error path of the CLI, one row each: the documented exit code (2 for a
configuration the user can fix before anything runs, 1 for a run that failed), a message that
names what went wrong, and no Python traceback unless `--debug` is given."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from seqline.orchestration.cli import app
from seqline.orchestration.store import RunStore
from seqline.pipeline import tfrecord
from tests import commands
from tests.conftest import USERFNS
from tests.e2e.test_cli import GOOD

pytestmark = pytest.mark.e2e

EVALUATE = """\
  - name: write
    component: tfrecord_write
  - name: batches
    component: batching
    params: {batch_size: 2, label: x}
  - name: model
    component: train
    params: {model: tabular_regression, epochs: 1}
  - name: evaluation
    component: evaluate
    params: {metrics: [mae], thresholds: "mae < 3"}
"""
FEATURES = "def add(batch):\n    return batch\n"


def _run(*args: str) -> list[str]:
    return ["run", "p.yaml", "--root", "root", "--run-id", "r1", *args]


# (id, pipeline file, {extra file: text}, CLI arguments, exit code, the message as a regex)
PATHS = [
    ("bad YAML", "stages:\n  - name: read\n    component: [ingest\n", {}, _run(), 2,
     r"p\.yaml: malformed YAML at line 4"),
    ("unknown component", GOOD.replace("component: preprocess", "component: preproces"), {},
     _run(), 2, r"unknown component 'preproces'\. Did you mean 'preprocess'\?"),
    ("bad parameter", GOOD.replace("block_records: 4", "block_record: 4"), {}, _run(), 2,
     r"stage 'read' \(line 3\), parameter block_record \(line 5\): unknown parameter\. Did you "
     r"mean 'block_records'\?"),
    ("bad parameter type", GOOD.replace("block_records: 4", "block_records: many"), {},
     _run(), 2, r"parameter block_records \(line 5\): expected a valid integer, found 'many'"),
    ("schema given as a list", GOOD.replace("block_records: 4", "schema: [x, y]"), {}, _run(),
     2, r"stage 'read' \(line 3\), parameter schema \(line 5\): expected a valid dictionary, "
        r"found \['x', 'y'\]\."),
    ("thresholds given as a string", GOOD.replace('"latency:double"', '"feat:add"') + EVALUATE,
     {"feat.py": FEATURES}, _run(), 2,
     r"stage 'evaluation' \(line 17\), parameter thresholds \(line 19\): expected a valid "
     r"dictionary, found 'mae < 3'\."),
    ("training on workers and on CPU replicas at once",
     GOOD.replace('"latency:double"', '"feat:add"') + EVALUATE.replace(
         "epochs: 1}", "epochs: 1, workers: 2, cpu_replicas: 2}").replace(
         'thresholds: "mae < 3"', "thresholds: {mae: {max: 3}}"),
     {"feat.py": FEATURES}, _run("--runner", "ray"), 2,
     r"stage 'model' \(line 14 of the pipeline file\): set workers or cpu_replicas, not "
     r"both \(each worker is one replica\)\."),
    ("module with a SyntaxError", GOOD.replace("latency:double", "feat:add"),
     {"feat.py": "def add(batch)\n    return batch\n"}, _run(), 2,
     r"stage 'features' \(line 6 of the pipeline file\): "
     r"function 'feat:add': importing module 'feat' failed at "
     r"\S+feat\.py, line 1: SyntaxError: expected ':'\. Fix the module"),
    ("module with an ImportError", GOOD.replace("latency:double", "feat:add"),
     {"feat.py": "import json\nimport no_such_package_here\n" + FEATURES}, _run(), 2,
     r"stage 'features' \(line 6 of the pipeline file\): "
     r"function 'feat:add': importing module 'feat' failed at "
     r"\S+feat\.py, line 2: ModuleNotFoundError: No module named 'no_such_package_here'\. "
     r"Install the missing module"),
    ("module that raises on import", GOOD.replace("latency:double", "feat:add"),
     {"feat.py": "LIMIT = int('ten')\n" + FEATURES}, _run(), 2,
     r"importing module 'feat' failed at \S+feat\.py, line 1: ValueError: invalid literal"),
    ("missing function", GOOD.replace("latency:double", "feat:ad"), {"feat.py": FEATURES},
     _run(), 2, r"stage 'features' \(line 6 of the pipeline file\): "
                r"function 'feat:ad': module 'feat' \(\S+feat\.py\) "
                r"has no function 'ad'\. Did you mean 'add'\?"),
    ("missing module", GOOD.replace("latency:double", "nofeat:add"), {}, _run(), 2,
     r"function 'nofeat:add': no module 'nofeat'"),
    ("missing input file", GOOD.replace("in.csv", "nowhere.csv"), {}, _run(), 2,
     r"input file 'nowhere.csv' not found"),
    ("missing pipeline file", None, {}, ["run", "absent.yaml", "--root", "root"], 2,
     r"cannot read pipeline file absent\.yaml"),
    ("bad data without an error budget", GOOD.replace("block_records: 4",
                                                      "block_records: 4, schema: {x: int64}"),
     {"in.csv": "x\n1\ntwo\n"}, _run(), 1,
     r"Run failed: .*stage 'read' \(line 3 of the pipeline file\): "
     r"bad record in \S+in\.csv, line 3, seq 1"),
    ("bad data over max_records alone", GOOD.replace("name: t\n", "name: t\nerrors: "
                                                     "{max_records: 1}\n").replace(
        "block_records: 4", "block_records: 4, schema: {x: int64}"),
     {"in.csv": "x\n1\ntwo\nthree\n4\n"}, _run(), 1,
     r"Run failed: stage 'read' exceeded its error budget: 2 bad records so far, more than "
     r"max_records 1\. The first: \S+in\.csv, line 3, seq 1: .+\. Fix the input"),
    ("function that fails on a record", GOOD.replace(
        '"latency:double"}', '"latency:boom_at", fn_kwargs: {seq: 6}}'), {}, _run(), 1,
     r"stage 'features' failed on seq 6 \(block 1\): ValueError: bad value at seq 6 \(at "
     r"\S+latency\.py, line \d+\)\. Run with --debug for the traceback\."),
    ("unwritable root", GOOD, {"afile": ""}, ["run", "p.yaml", "--root", "afile/root"], 2,
     r"--root afile/root: cannot create it"),
    ("bad --root URL", GOOD, {}, ["run", "p.yaml", "--root", "bogus://x"], 2,
     r"--root bogus://x: unknown scheme 'bogus'"),
    ("bad --root URL for verify", None, {}, ["verify", "r1", "--root", "bogus://x"], 2,
     r"--root bogus://x: unknown scheme 'bogus'"),
    ("unknown run id for verify", None, {}, ["verify", "nosuch", "--root", "root"], 2,
     r"no run 'nosuch' under \S+root"),
    ("a run id under a root where nothing has run", None, {},
     ["verify", "first", "--root", "elsewhere"], 2,
     r"^error: no run 'first' under --root elsewhere: nothing has run there \(no run store at "
     r"elsewhere/seqline\.db\); pass the --root \(or --store\) the run used$"),
    ("unknown run id for resume", GOOD, {}, _run("--resume"), 2,
     r"no run 'r1' to resume under root/runs; check --run-id and --root"),
    ("a PostgreSQL store that is not up", GOOD, {},
     _run("--store", "postgresql+psycopg://ml:secret@127.0.0.1:1/seqline"), 2,
     r"^error: cannot open the run store at postgresql\+psycopg://ml:\*\*\*@127\.0\.0\.1:1/"
     r"seqline: .*127\.0\.0\.1.*; check --store \(postgresql\+psycopg://user@host:port/db\) "
     r"or --root$"),
    ("a store URL of no database seqline knows", GOOD, {}, _run("--store", "postgres://x/y"), 2,
     r"^error: cannot open the run store at postgres://x/y: Can't load plugin: "
     r"sqlalchemy\.dialects:postgres; check --store"),
    ("a PostgreSQL store that is not up, listing runs", None, {},
     ["runs", "list", "--root", "root", "--store", "postgresql+psycopg://ml@127.0.0.1:1/x"], 2,
     r"^error: cannot open the run store at postgresql\+psycopg://ml@127\.0\.0\.1:1/x: "),
    ("a TFRecord feature declared as a type its list cannot hold",
     GOOD.replace('{format: csv, paths: ["in.csv"], block_records: 4}',
                  '{format: tfrecord, paths: ["x.tfrecord"], schema: {x: double}}'),
     {"x.tfrecord": tfrecord.frame(tfrecord.encode(tfrecord.normalize(
         pa.record_batch({"x": [1, 2, 3]}))))}, _run(), 1,
     r"^Run failed: stage 'read' \(line 3 of the pipeline file\): \S+x\.tfrecord: feature 'x' "
     r"is stored as int64_list, which cannot be read as double \(declared in `schema:`, or "
     r"the first file's type\)\. Declare it as int64, or convert it in a preprocess stage\.$"),
    ("bad option value", GOOD, {}, _run("--runner", "spark"), 2, r"Invalid value"),
    ("a secret in a Beam option", GOOD, {}, _run("--runner", "beam", "--beam-option",
                                                 "aws_secret_access_key=x"), 2,
     r"--beam-option aws_secret_access_key: options are recorded with the run"),
    ("a Beam option that is not KEY=VALUE", GOOD, {}, _run("--runner", "beam",
                                                          "--beam-option", "FlinkRunner"), 2,
     r"--beam-option 'FlinkRunner': expected KEY=VALUE"),
    ("another Beam runner without a temp_location", GOOD, {},
     _run("--runner", "beam", "--beam-option", "runner=FlinkRunner"), 2,
     r"needs a location that its workers and this driver both reach.*`--beam-option "
     r"temp_location=URL` on the command line"),
    ("a Beam option on the local runner", GOOD, {},
     _run("--beam-option", "runner=FlinkRunner"), 2,
     r"^error: --beam-option is an option of --runner beam, and this run's runner is local: "
     r"add `--runner beam`, or drop --beam-option\.$"),
    ("a misspelt Beam option", GOOD, {}, _run("--runner", "beam", "--beam-option",
                                             "temp_locaton=/tmp/x"), 2,
     r"^error: runner beam: Beam has no option 'temp_locaton'; did you mean 'temp_location' "
     r"\(`--beam-option temp_location=…`\)\?$"),
    ("a Beam option its FnApiRunner would drop", GOOD, {},
     _run("--runner", "beam", "--beam-option", "flink_conf_dir=/etc/flink"), 2,
     r"^error: runner beam: Beam has no option 'flink_conf_dir', and its FnApiRunner would "
     r"run without it\."),
]


BAD_DATA = PATHS[[p[0] for p in PATHS].index("bad data without an error budget")]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(10)))
    shutil.copy(USERFNS / "latency.py", tmp_path / "latency.py")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return commands.seqline(*args)


def _prepare(folder: Path, text: str | None, files: dict[str, str | bytes]) -> None:
    if text is not None:
        (folder / "p.yaml").write_text(text)
    for name, content in files.items():
        if isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            (folder / name).write_text(content)


@pytest.mark.parametrize(("text", "files", "args", "code", "message"),
                         [p[1:] for p in PATHS], ids=[p[0] for p in PATHS])
def test_error_path_exits_with_its_code_and_message_and_no_traceback(folder, text, files,
                                                                     args, code, message):
    _prepare(folder, text, files)
    result = CliRunner().invoke(app, args)
    # An exception escaping the CLI is what a user would see as a traceback.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == code, result.output
    assert re.search(message, " ".join(result.output.split())), result.output
    assert "Traceback" not in result.output


def test_a_store_that_cannot_be_opened_leaves_no_root_folder_behind(folder):
    """A --store typo refuses the run before anything is written: the root's folder that the
    command made for it is gone again (a typo must not leave folders to clean up)."""
    _prepare(folder, GOOD, {})
    result = CliRunner().invoke(app, _run("--store", "postgresql+psycopg://ml@127.0.0.1:1/x"))
    assert result.exit_code == 2, result.output
    assert not (folder / "root").exists()


def test_a_ray_cluster_that_is_not_there_fails_the_run_in_one_line_at_once(folder):
    """Ray itself tries a wrong address for as long as it is left to. (A process of its own:
    a test worker whose session Ray is up would run on that one.) Port 1: nothing listens."""
    _prepare(folder, GOOD, {})
    started = time.monotonic()
    done = commands.seqline(*_run("--runner", "ray", "--ray-address", "127.0.0.1:1"),
                            cwd=folder, timeout=120)
    assert done.returncode == 1 and time.monotonic() - started < 30, done.stderr
    assert done.stderr.strip().splitlines() == [
        "Run failed: Ray did not start: the cluster at 127.0.0.1:1 cannot be reached "
        "(Connection refused). Check that it is up and that its address and port are right "
        f"(`ray status` on its head), then finish the run with `seqline run {folder}/p.yaml "
        f"--root {folder}/root --runner ray --workers 2 --ray-address 127.0.0.1:1 --resume "
        "--run-id r1`."], done.stderr  # the run's own command, as `runs show` prints it


def test_configuration_errors_are_found_before_anything_runs(folder):
    _prepare(folder, GOOD.replace("latency:double", "feat:add"),
             {"feat.py": "def add(batch)\n"})
    assert CliRunner().invoke(app, _run()).exit_code == 2
    assert not (folder / "root").exists()


def test_debug_shows_the_traceback_and_plain_does_not(folder):
    """Through the console script, as a user sees it: one line, or with --debug the whole
    traceback of the error being reported."""
    _prepare(folder, GOOD.replace("latency:double", "feat:add"),
             {"feat.py": "def add(batch)\n    return batch\n"})
    plain = _cli(*_run())
    assert plain.returncode == 2
    assert plain.stdout == "" and "Traceback" not in plain.stderr
    assert len(plain.stderr.strip().splitlines()) == 1, plain.stderr  # one line, whole
    debug = _cli("--debug", *_run())
    assert debug.returncode != 0
    assert "Traceback" in debug.stderr and "SyntaxError" in debug.stderr


def _full_store(folder: Path, refused: dict[str, str]) -> Path:
    """The root's run store, refusing to record the statuses given per table as a full SQLite
    database would, in SQLite's own words (a disk cannot be filled at one exact write)."""
    with RunStore.open(folder / "root") as store:
        database = Path(str(store.engine.url.database))
    with sqlite3.connect(database) as db:
        for table, statuses in refused.items():
            db.execute(f"CREATE TRIGGER full_{table} BEFORE UPDATE OF status ON {table} "
                       f"WHEN NEW.status IN ({statuses}) "
                       "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END")
    return database


def test_a_store_that_cannot_record_the_failure_does_not_hide_it(folder):
    """A full disk can hold the run store as well as the shards. The run's own error is still
    the line a user reads, and the store's failure is one line of warning beside it, not a
    traceback."""
    _prepare(folder, *BAD_DATA[1:3])
    _full_store(folder, {"runs": "'failed'", "stage_runs": "'failed', 'cancelled', 'skipped'"})
    done = _cli(*_run())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    said = " ".join(done.stderr.split())
    assert re.search(BAD_DATA[5], said), done.stderr
    assert ("run r1: the run store could not record that stage read ended, stage features "
            "ended, the run failed (database or disk is full)") in said, done.stderr
    assert done.stderr.count("could not record") == 1, done.stderr


@pytest.mark.parametrize(("table", "message"), [
    ("stage_runs", r"stage '(read|features)': the run store at sqlite:///\S+seqline\.db could "
                   r"not record what the stage committed \(database or disk is full\)\. "),
    ("runs", r"run r1: every stage committed, but the run store at sqlite:///\S+seqline\.db "
             r"could not record that the run succeeded \(database or disk is full\)\. "),
], ids=["a stage's commit", "the run's success"])
def test_a_store_that_cannot_record_a_commit_fails_the_run_in_one_line_and_resumes(
        folder, table, message):
    """The stage's files are committed, the store cannot say so: the run fails naming the
    store (and the stage), and a resume once the store takes writes again keeps them."""
    _prepare(folder, GOOD, {})
    database = _full_store(folder, {table: "'succeeded'"})
    done = _cli(*_run())
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    said = " ".join(done.stderr.split())
    assert re.search("Run failed: " + message + r".* --resume --run-id r1`", said), done.stderr
    with sqlite3.connect(database) as db:
        db.execute(f"DROP TRIGGER full_{table}")
    resumed = _cli(*_run("--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert "All artifacts hold the ordering contract." in resumed.stdout
