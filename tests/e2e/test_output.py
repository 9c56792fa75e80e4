"""Output that survives a pipe: `seqline run` into files, as in a CI log, with a narrow
COLUMNS. Tables whole (no cell cut to `…`), every message on one line, no escape codes, and
none of the engines' own start-up chatter unless -v."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import commands
from tests.conftest import REPO

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "docs" / "examples" / "readings"
# What TensorFlow, absl, Beam and Ray print of their own when nobody asks them to be quiet.
CHATTER = re.compile(r"oneDNN|cuInit|cuda drivers|absl::InitializeLog|cudart_stub|"
                     r"Token authentication|Started a local Ray|apache_beam\.runners")
SEQLINE = [sys.executable, "-m", "seqline.orchestration.cli"]


def _seqline(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI with stdout and stderr going to pipes (not a terminal) and COLUMNS=40."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("TF_CPP_MIN_LOG_LEVEL", "FORCE_COLOR", "NO_COLOR")}
    environment.update(COLUMNS="40", TERM="xterm-256color", **env)
    return commands.seqline(*args, cwd=folder, env=environment, timeout=600)


@pytest.fixture
def readings(tmp_path):
    for name in ("data-only.yaml", "pipeline.yaml", "features.py", "readings.csv"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    return tmp_path


def _table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("│", "┃"))]


def test_piped_run_prints_whole_tables_plain_text_and_no_engine_chatter(readings):
    """The whole example, train and evaluate included, so TensorFlow is imported."""
    result = _seqline(readings, "run", "pipeline.yaml", "--root", "root", "--run-id", "r1")
    assert result.returncode == 0, result.stderr
    both = result.stdout + result.stderr
    assert "\x1b[" not in both  # no colour or cursor codes in a file
    assert not CHATTER.search(both), both
    assert result.stderr == ""  # no progress bar off a terminal, no start-up lines
    rows = _table_rows(result.stdout)
    assert len(rows) >= 2 * 6  # the stages table and the verify table, a row per stage
    assert not any("…" in row for row in rows), result.stdout
    # Wider than COLUMNS: rich did not fit the table to 40 columns by cutting or wrapping.
    assert max(len(row) for row in rows) > 40
    stage_rows = [row.split("│")[1].strip() for row in rows if row.startswith("│")]
    for stage in ("read", "examples", "features", "batches", "model", "evaluation"):
        assert stage_rows.count(stage) == 2, stage_rows  # whole, once in each table
    # Each run line whole: the run id and the artifact folder on the same line.
    assert re.search(r"^Run r1 succeeded: ran 6 of 6 stages on local; "
                     r"artifacts in \S+/root/runs/r1$", result.stdout, re.M), result.stdout


def test_piped_error_is_one_whole_line(readings):
    text = (readings / "data-only.yaml").read_text()
    (readings / "bad.yaml").write_text(text.replace("tfrecord_write", "tfrecord_writer"))
    result = _seqline(readings, "run", "bad.yaml", "--root", "root")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: bad.yaml: stage 'examples' (line 6): unknown component "
        "'tfrecord_writer'. Did you mean 'tfrecord_write'? Components: ingest, "
        "tfrecord_write, preprocess, batching, train, evaluate."], result.stderr
    assert result.stdout == ""


def test_quiet_prints_nothing_on_success_and_verbose_lets_the_engines_speak(readings):
    quiet = _seqline(readings, "-q", "run", "data-only.yaml", "--root", "root")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "" and quiet.stderr.strip() == ""
    if shutil.which("nvidia-smi"):
        return  # with a GPU TensorFlow has other things to say: the chatter below is CPU-only
    # -v: TensorFlow's own start-up lines are no longer held back (on a machine without a
    # GPU it reports the missing CUDA drivers); the run still succeeds.
    verbose = _seqline(readings, "-v", "run", "pipeline.yaml", "--root", "root",
                       "--no-verify")
    assert verbose.returncode == 0, verbose.stderr
    assert CHATTER.search(verbose.stderr), verbose.stderr


def test_no_color_is_honoured_on_a_terminal(readings):
    """On a terminal the verify table is coloured, unless NO_COLOR is set (no-color.org)."""
    made = _seqline(readings, "run", "data-only.yaml", "--root", "root", "--run-id", "r1",
                    "--no-verify")
    assert made.returncode == 0, made.stderr

    def on_a_terminal(**env: str) -> str:
        leader, follower = pty.openpty()
        environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        environment.update(COLUMNS="200", TERM="xterm-256color", **env)
        proc = subprocess.run([*SEQLINE, "verify", "r1", "--root", "root"], cwd=readings,
                              env=environment, stdout=follower, stderr=follower, check=False)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        assert proc.returncode == 0
        return b"".join(chunks).decode()

    colour = re.compile(r"\x1b\[[0-9;]*3[0-9]")
    assert colour.search(on_a_terminal())  # the check below could fail
    assert not colour.search(on_a_terminal(NO_COLOR="1"))


# -- --json and -q on every command ------------------------------------------------------------


def _json(result: subprocess.CompletedProcess[str]) -> object:
    """stdout as one JSON document: nothing else may be in it (no table, no log line)."""
    assert "\x1b[" not in result.stdout + result.stderr
    return json.loads(result.stdout)


def test_run_json_is_the_run_store_document_with_verify_verdict(readings):
    """`run --json | python -m json.tool` works: the document `runs show --json` prints, plus
    verify's verdict, which `verify --json` prints alone, as verify.json holds it."""
    made = _seqline(readings, "run", "data-only.yaml", "--root", "root", "--run-id", "r1",
                    "--json")
    assert made.returncode == 0, made.stderr
    assert made.stderr == ""
    document = _json(made)
    shown = _json(_seqline(readings, "runs", "show", "r1", "--root", "root", "--json"))
    saved = json.loads((readings / "root" / "runs" / "r1" / "verify.json").read_text())
    assert document == {**shown, "verify": saved}
    assert (document["run_id"], document["status"]) == ("r1", "succeeded")
    assert [s["name"] for s in document["stages"]] == ["read", "examples", "features"]
    assert document["verify"]["ok"] is True
    verified = _seqline(readings, "verify", "r1", "--root", "root", "--json")
    assert verified.returncode == 0 and _json(verified) == saved


def test_verify_json_keeps_the_failing_exit_code(readings):
    made = _seqline(readings, "-q", "run", "data-only.yaml", "--root", "root", "--run-id", "r1",
                    "--no-verify", "--json")
    assert made.returncode == 0 and _json(made)["verify"] is None
    shard = sorted((readings / "root" / "runs" / "r1" / "examples").glob("*.tfrecord*"))[1]
    shard.write_bytes(shard.read_bytes()[:-7])  # a truncated shard
    for flags in ((), ("-q",)):  # -q: the JSON is the answer asked for, still printed
        checked = _seqline(readings, *flags, "verify", "r1", "--root", "root", "--json")
        assert checked.returncode == 1, checked.stderr
        verdict = _json(checked)
        assert verdict["ok"] is False
        bad = [s for s in verdict["stages"] if not s["ok"]]
        assert bad[0]["stage"] == "examples" and bad[0]["problems"]
        assert f"examples: {bad[0]['problems'][0]}" in checked.stderr.splitlines()  # why 1


FAILING = '''
import pyarrow as pa


def boom(batch: pa.RecordBatch) -> pa.RecordBatch:
    print("a user's own print")
    if batch.column("__seq__")[0].as_py() >= 200:
        raise ValueError("no good")
    return batch
'''


def test_failed_run_json_names_the_failure_and_stdout_holds_only_json(readings):
    (readings / "failing.py").write_text(FAILING)
    text = (readings / "data-only.yaml").read_text().replace("features:add_columns",
                                                             "failing:boom")
    (readings / "failing.yaml").write_text(text)
    failed = _seqline(readings, "run", "failing.yaml", "--root", "root", "--run-id", "f1",
                      "--json")
    assert failed.returncode == 1
    document = _json(failed)  # the user's print went to stderr, not into the JSON
    assert (document["status"], document["error"]["stage"]) == ("failed", "features")
    assert document["verify"] is None
    assert "a user's own print" in failed.stderr
    errors = [line for line in failed.stderr.splitlines() if line.startswith("Run failed")]
    assert len(errors) == 1 and "stage 'features'" in errors[0] and "seq 200" in errors[0]


def test_quiet_silences_every_command_but_its_json_and_errors(readings):
    made = _seqline(readings, "-q", "run", "data-only.yaml", "--root", "root", "--run-id", "r1")
    assert made.returncode == 0, made.stderr
    pipeline = str(readings / "data-only.yaml")

    def each(name: str) -> list[tuple[str, ...]]:  # a schedule of its own for each mode
        return [("runs", "list"), ("runs", "show", "r1"), ("store", "rebuild"),
                ("verify", "r1"), ("schedule", "add", name, pipeline, "--cron", "@daily"),
                ("schedule", "list"), ("schedule", "show", name), ("schedule", "pause", name),
                ("schedule", "resume", name), ("schedule", "remove", name)]

    for loud_command, quiet_command in zip(each("loud"), each("quiet"), strict=True):
        loud = _seqline(readings, *loud_command, "--root", "root")
        assert loud.returncode == 0 and loud.stdout.strip(), (loud_command, loud.stderr)
        quiet = _seqline(readings, "-q", *quiet_command, "--root", "root")
        assert quiet.returncode == 0, (quiet_command, quiet.stderr)
        assert (quiet.stdout, quiet.stderr) == ("", ""), quiet_command
    for command in (("runs", "list"), ("runs", "show", "r1"), ("verify", "r1"),
                    ("schedule", "list")):
        assert _json(_seqline(readings, "-q", *command, "--root", "root", "--json")) is not None
    gone = _seqline(readings, "-q", "runs", "show", "nope", "--root", "root")
    assert gone.returncode == 2 and "nope" in gone.stderr  # errors still speak


RETRIED = '''
import json
import os

import pyarrow as pa


def flaky(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Fails the first call on each block (a flaky service), then works."""
    first = batch.column("__seq__")[0].as_py()
    mark = os.path.join(os.path.dirname(__file__), f"called-{first}")
    if not os.path.exists(mark):
        open(mark, "w").close()
        raise ConnectionError("service unavailable")
    return batch
'''


def _retried(readings: Path) -> str:
    """data-only.yaml with a preprocess that fails once per block, retried once."""
    (readings / "retried.py").write_text(RETRIED)
    text = (readings / "data-only.yaml").read_text().replace(
        'params: {fn: "features:add_columns"}',
        'params: {fn: "retried:flaky"}\n    retry_user_errors: 1')
    assert "retry_user_errors" in text
    (readings / "retried.yaml").write_text(text)
    return "retried.yaml"


def test_each_log_line_of_a_run_names_its_stage(readings):
    """The retry lines on stderr and the artifact lines on stdout: grep by stage finds them."""
    result = _seqline(readings, "run", _retried(readings), "--root", "root", "--run-id", "r1")
    assert result.returncode == 0, result.stderr
    retries = result.stderr.splitlines()
    assert len(retries) == 3, result.stderr  # a block per stored shard, one retry each
    for line in retries:
        assert re.search(r"stage 'features': .*block \d+ \(first seq \d+\)", line), line
    lines = [line for line in result.stdout.splitlines() if not line.startswith(
        ("┏", "┃", "┡", "│", "└", "stages (", "verify r1", "Run r1 ", "All artifacts"))]
    assert lines and all(re.match(r"\s+(read|examples|features)\s", line) for line in lines), \
        result.stdout


@pytest.mark.parametrize("runner", ["local", "beam"])
def test_quiet_keeps_the_workers_retry_warnings_out_too(readings, runner):
    """The retries happen in worker processes: -q reaches them through the environment."""
    result = _seqline(readings, "-q", "run", _retried(readings), "--root", "root",
                      "--runner", runner)
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", "")


def test_piped_help_is_plain_text_with_each_option_on_one_line(readings):
    for command in ((), ("run",), ("schedule", "add")):
        shown = _seqline(readings, *command, "--help")
        assert shown.returncode == 0, shown.stderr
        assert not re.search(r"[╭│╰…]|\x1b\[", shown.stdout), shown.stdout
    options = {line.split()[0]: line for line in shown.stdout.splitlines()
               if line.strip().startswith("--")}
    assert "or @daily." in options["--cron"], shown.stdout  # its whole help, on its line
    run_help = _seqline(readings, "run", "--help").stdout
    assert re.search(r"^\s+--json\s+Print the run as one JSON document .* Everything else goes "
                     r"to stderr\.$", run_help, re.M), run_help


def test_verify_of_a_failed_run_vouches_only_for_what_it_committed(readings):
    """A failed run's verify: a row per stage in pipeline order, those without committed
    output a problem, exit 1 (a CI job gating on it must not pass a failed run)."""
    features = readings / "features.py"
    features.write_text(features.read_text().replace('"humidity"', '"humidty"'))
    made = _seqline(readings, "run", "data-only.yaml", "--root", "root", "--run-id", "f",
                    "--one-by-one", "--no-verify")
    assert made.returncode == 1, made.stderr
    checked = _seqline(readings, "verify", "f", "--root", "root", "--json")
    assert checked.returncode == 1, checked.stderr
    verdict = _json(checked)
    assert [(s["stage"], s["ok"]) for s in verdict["stages"]] == [
        ("read", True), ("examples", True), ("features", False)]
    assert verdict["stages"][2]["problems"] == ["no committed output: the run failed."]
    assert "features: no committed output: the run failed." in checked.stderr.splitlines()
    shown = _seqline(readings, "verify", "f", "--root", "root")
    assert shown.returncode == 1
    assert [row.split("│")[1].strip() for row in _table_rows(shown.stdout)
            if row.startswith("│")] == ["read", "examples", "features"]
    assert shown.stdout.splitlines()[-1] == \
        "The run did not commit every stage; what it committed holds the contract."
    # finished without verify, it keeps no verdict of the failed attempt (the dashboard's)
    verdict_file = readings / "root" / "runs" / "f" / "verify.json"
    assert verdict_file.exists()
    features.write_text(features.read_text().replace('"humidty"', '"humidity"'))
    done = _seqline(readings, "run", "data-only.yaml", "--root", "root", "--run-id", "f",
                    "--resume", "--no-verify")
    assert done.returncode == 0, done.stderr
    assert not verdict_file.exists()


def test_a_model_of_your_own_imports_tensorflow_quietly_too(readings):
    """`model: "module:function"` (the tutorial's): the module, keras with it, is imported
    when the pipeline loads, which was before TensorFlow's start-up lines were kept out."""
    (readings / "mymodel.py").write_text(
        "import keras\n\n\n"
        "def build(spec):\n"
        "    inputs = keras.Input(spec.input_shape)\n"
        "    outputs = keras.layers.Dense(1)(keras.layers.Flatten()(inputs))\n"
        "    model = keras.Model(inputs, outputs)\n"
        "    model.compile(optimizer='adam', loss='mse', metrics=['mae'])\n"
        "    return model\n")
    pipeline = readings / "pipeline.yaml"
    text = re.sub(r"model: sequence_forecasting, epochs: \d+",
                  'model: "mymodel:build", epochs: 1', pipeline.read_text())
    assert "mymodel:build" in text
    pipeline.write_text(text)
    done = _seqline(readings, "-q", "run", "pipeline.yaml", "--root", "root", "--no-verify")
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")
