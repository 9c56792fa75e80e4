"""One truth, many surfaces: for the demo, a failing run, a cached rerun and a cancelled run,
the terminal's table, `run --json`, `runs show --json`, `/api` and the dashboard's run page
agree on every stage's status, counts and seconds, and on the failure's one line."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from markupsafe import escape

from tests.commands import EXE
from tests.conftest import USERFNS
from tests.dashboard.conftest import BAD_FEATURES, DEMO, SLOW, Server, seqline

pytestmark = pytest.mark.e2e

FIELDS = ("status", "records_in", "records_out", "seconds", "waited_input", "waited_output")


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory) -> Iterator[dict]:
    """The three runs, what the terminal and `run --json` said of each, and the dashboard."""
    folder = tmp_path_factory.mktemp("truth")
    shutil.copytree(DEMO, folder / "demo")
    demo = folder / "demo" / "pipeline.yaml"
    demo.write_text(demo.read_text().replace("epochs: 15", "epochs: 2"))
    (folder / "demo" / "bad_features.py").write_text(BAD_FEATURES)
    bad = folder / "demo" / "bad.yaml"
    bad.write_text(demo.read_text().replace("features:add_columns", "bad_features:add_columns"))
    root = folder / "root"
    said = {
        "demo": seqline("run", str(demo), "--root", str(root), "--run-id", "demo"),
        "bad": seqline("run", str(bad), "--root", str(root), "--run-id", "bad", "--json"),
        "again": seqline("run", str(demo), "--root", str(root), "--run-id", "again", "--json"),
    }
    assert [said[r].returncode for r in said] == [0, 1, 0], [said[r].stderr for r in said]
    server = Server(root)
    try:
        yield {"root": root, "said": said, "url": server.url}
    finally:
        server.stop()


def _shown(root: Path, run_id: str) -> dict:
    done = seqline("runs", "show", run_id, "--root", str(root), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _terminal_table(stdout: str) -> dict[str, dict]:
    """The stage table `seqline run` printed (piped: every column), by stage."""
    lines = [line for line in stdout.splitlines() if line.startswith("│")]
    header = next(i for i, line in enumerate(stdout.splitlines()) if line.startswith("┃"))
    names = [c.strip() for c in stdout.splitlines()[header].strip("┃").split("┃")]
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.strip("│").split("│")]
        if len(cells) == len(names) and "why" in names:
            rows[cells[0]] = dict(zip(names, cells, strict=True))
    return rows


def _page_rows(html: str) -> dict[str, dict]:
    rows = {}
    for name, body in re.findall(r'<tr class="stage-row[^"]*" data-stage="([^"]+)">(.*?)</tr>',
                                 html, re.S):
        cells = {k: re.sub(r"<[^>]+>", "", v).strip() for k, v in re.findall(
            r'<td class="(?:num )?([a-z-]+)">(.*?)</td>', body, re.S)}
        rows[name] = cells
    return rows


def _number(text: str) -> float:
    return float(re.sub(r"[^0-9.]", "", text) or 0)


def _agree(document: dict, api: dict, page: str, terminal: dict[str, dict] | None) -> None:
    stages = {s["name"]: s for s in document["stages"]}
    assert [s["name"] for s in api["stages"]] == list(stages)
    for s in api["stages"]:  # /api: the same stage documents
        assert {k: s[k] for k in FIELDS} == {k: stages[s["name"]][k] for k in FIELDS}
        assert s["reason"] == stages[s["name"]]["reason"]
    rows = _page_rows(page)
    assert list(rows) == list(stages)
    for name, s in stages.items():
        row = rows[name]
        assert row["stage-status"] == s["status"], (name, row)
        assert _number(row["records-in"]) == (s["records_in"] or 0), (name, row)
        assert _number(row["seconds"]) == pytest.approx(s["seconds"] or 0, abs=0.01)
        assert _number(row["waited-in"]) == pytest.approx(s["waited_input"] or 0, abs=0.01)
        assert _number(row["waited-out"]) == pytest.approx(s["waited_output"] or 0, abs=0.01)
        assert (row["why"] or None) == (s["reason"] or (
            f"reused from run {s['cached_from']}" if s["cached_from"] else None)), name
    if terminal is not None:
        assert list(terminal) == list(stages)
        for name, s in stages.items():
            row = terminal[name]
            assert row["status"] == s["status"] and row["why"] == (s["reason"] or "")
            assert _number(row["in"]) == (s["records_in"] or 0)
            assert _number(row["out"]) == (s["records_out"] or 0)
            assert _number(row["s"]) == pytest.approx(s["seconds"] or 0, abs=0.01)
            assert _number(row["waited in"]) == pytest.approx(s["waited_input"] or 0, abs=0.01)


def _surfaces_of(surfaces: dict, run_id: str) -> tuple[dict, dict, str]:
    shown = _shown(surfaces["root"], run_id)
    api = httpx.get(f"{surfaces['url']}/api/runs/{run_id}").json()
    page = httpx.get(f"{surfaces['url']}/runs/{run_id}").text
    return shown, api, page


def test_the_demo_tells_one_story_everywhere(surfaces):
    shown, api, page = _surfaces_of(surfaces, "demo")
    _agree(shown, api, page, _terminal_table(surfaces["said"]["demo"].stdout))
    assert {s["status"] for s in shown["stages"]} == {"succeeded"}
    assert "ran 6 of 6 stages on local" in surfaces["said"]["demo"].stdout
    listed = seqline("runs", "show", "demo", "--root", str(surfaces["root"]), "--json",
                     "--events")
    events = json.loads(listed.stdout)["events"]  # what the stage rows were made from
    assert events[0]["kind"] == "run_started" and events[-1]["kind"] == "run_ended"
    committed = {e["stage"]: e for e in events if e["kind"] == "stage_committed"}
    for s in shown["stages"]:
        assert committed[s["name"]]["counts"]["records_in"] == s["records_in"]
        assert committed[s["name"]]["seconds"] == pytest.approx(s["seconds"])


def test_a_failure_is_one_line_everywhere_and_the_rest_were_stopped(surfaces):
    said = surfaces["said"]["bad"]
    printed = json.loads(said.stdout)  # run --json: the runs show document, and verify
    shown, api, page = _surfaces_of(surfaces, "bad")
    assert {k: v for k, v in printed.items() if k not in ("verify", "heartbeat")} == \
        {k: v for k, v in shown.items() if k != "heartbeat"}
    _agree(shown, api, page, None)
    error = shown["error"]
    assert error["stage"] == "features" and "\n" not in error["message"]
    assert "a day the feature code cannot take" in error["message"]
    assert "Traceback" in error["traceback"] and "bad_features.py" in error["traceback"]
    line = next(x for x in said.stderr.splitlines() if x.startswith("Run failed: "))
    assert line.removeprefix("Run failed: ").startswith(error["message"])  # the same line
    statuses = {s["name"]: (s["status"], s["reason"], s["error"]) for s in shown["stages"]}
    assert statuses["features"][0] == "failed"
    # started with the run: cancelled if features' first blocks had reached them, skipped
    # if they only waited
    stages = {s["name"]: s for s in shown["stages"]}
    for name in ("batches", "model", "evaluation"):
        status, reason, own_error = statuses[name]
        assert own_error is None and status in ("cancelled", "skipped"), name
        if status == "skipped":
            assert reason == "not run: upstream `features` failed", reason
            assert stages[name]["seconds"] is None and not stages[name]["records_in"], name
        else:
            assert re.fullmatch(r"stopped after \d+\.\d\d s: upstream `features` failed",
                                reason), reason
    assert page.count(str(escape(error["message"]))) == 1
    assert "Traceback (most recent call last)" not in page  # (on the stage's page, folded)


def test_a_cached_rerun_says_where_each_stage_came_from(surfaces):
    printed = json.loads(surfaces["said"]["again"].stdout)
    shown, api, page = _surfaces_of(surfaces, "again")
    assert {k: v for k, v in printed.items() if k not in ("verify", "heartbeat")} == \
        {k: v for k, v in shown.items() if k != "heartbeat"}
    _agree(shown, api, page, None)
    stages = {s["name"]: s for s in shown["stages"]}
    # evaluate compares with the last blessed model: if the first run blessed its model, the
    # evaluation runs again against it
    blessed = {s["name"]: s for s in _shown(surfaces["root"], "demo")["stages"]}[
        "evaluation"]["evaluation"]["blessed"]
    reused = ["read", "examples", "features", "batches", "model"] + ([] if blessed
                                                                    else ["evaluation"])
    for name in reused:
        assert stages[name]["status"] == "cached" and stages[name]["cached_from"] == "demo"
        assert stages[name]["seconds"] == 0.0
        assert re.fullmatch(r"reused from run demo \(took \d+\.\d\d s\)", stages[name]["reason"])
    if blessed:
        assert stages["evaluation"]["status"] == "succeeded"
        assert stages["evaluation"]["reason"] == "the artifacts it compares with changed"


def test_store_rebuild_gives_the_documents_the_live_runs_recorded(surfaces, tmp_path):
    """A lost store, recreated from the run folders: the same stages, kinds and reasons."""
    store = f"sqlite:///{tmp_path / 'rebuilt.db'}"
    done = seqline("store", "rebuild", "--root", str(surfaces["root"]), "--store", store)
    assert done.returncode == 0, done.stderr
    kept = ("name", "component", "status", "records_in", "records_out", "filtered",
            "exploded", "dead_lettered", "cached_from", "reason", "cache_key", "params")
    for run_id in ("demo", "again"):
        live = _shown(surfaces["root"], run_id)
        again = seqline("runs", "show", run_id, "--root", str(surfaces["root"]), "--store",
                        store, "--json")
        rebuilt = json.loads(again.stdout)
        for a, b in zip(live["stages"], rebuilt["stages"], strict=True):
            assert {k: a[k] for k in kept} == {k: b[k] for k in kept}
            assert sorted(a["artifacts"], key=lambda x: x["role"]) == \
                sorted(b["artifacts"], key=lambda x: x["role"])
            assert a["evaluation"] == b["evaluation"]


# SLOW's two stages, and one that runs only once `work` has committed (--one-by-one): a
# cancel while `work` runs stops it, and `more` never starts.
STOPPED = SLOW + """  - {name: more, component: preprocess, params: {fn: "latency:double"}}
"""


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Iterator[dict]:
    """A run cancelled with Ctrl-C (SIGINT) a second into `work`, and the dashboard on it."""
    folder = tmp_path_factory.mktemp("stopped")
    (folder / "in.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(200)))
    (folder / "latency.py").write_text((USERFNS / "latency.py").read_text())
    (folder / "stopped.yaml").write_text(STOPPED)
    run = subprocess.Popen([EXE, "run", "stopped.yaml", "--root", "root", "--run-id", "cut",
                            "--one-by-one", "--json"], cwd=folder, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    log = folder / "root/runs/cut/log.jsonl"
    deadline = time.monotonic() + 120
    while not (log.exists() and '"work", "message": "started"' in log.read_text()):
        assert run.poll() is None and time.monotonic() < deadline, "the run never started"
        time.sleep(0.1)
    time.sleep(1.0)  # (work's blocks take 0.3-0.9 s each)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 128 + signal.SIGINT, err
    server = Server(folder / "root")
    try:
        yield {"root": folder / "root", "url": server.url, "out": out, "err": err}
    finally:
        server.stop()


def test_a_cancelled_run_tells_one_story_everywhere(stopped):
    """The stage that was running is cancelled with its seconds (as its reason says them)
    on every surface, and drawn for the time it ran; the one that never started is skipped,
    with no seconds and no bar."""
    surfaces = {"root": stopped["root"], "url": stopped["url"]}
    shown, api, page = _surfaces_of(surfaces, "cut")
    printed = json.loads(stopped["out"])  # run --json: the runs show document
    assert {k: v for k, v in printed.items() if k not in ("verify", "heartbeat")} == \
        {k: v for k, v in shown.items() if k != "heartbeat"}
    _agree(shown, api, page, None)
    assert shown["status"] == "cancelled" and "cancelled (SIGINT)" in stopped["err"]
    stages = {s["name"]: s for s in shown["stages"]}
    work, more = stages["work"], stages["more"]
    assert work["status"] == "cancelled" and work["seconds"] > 0.5, work
    assert work["reason"] == (f"stopped after {work['seconds']:.2f} s: the run was cancelled "
                              "(SIGINT)")
    assert (more["status"], more["seconds"], more["records_in"], more["reason"]) == (
        "skipped", None, None, "not run: the run was cancelled (SIGINT)")
    drawn = _timeline_rows(page)
    bar = re.search(r'class="tl-bar tl-working" data-state="working" data-seconds="([0-9.]+)"',
                    drawn["work"])
    assert bar and float(bar.group(1)) == pytest.approx(work["seconds"], abs=0.01)
    assert escape(work["reason"]) in drawn["work"]  # its note
    assert "tl-bar" not in drawn["more"] and escape(more["reason"]) in drawn["more"]
    shown_text = seqline("runs", "show", "cut", "--root", str(stopped["root"])).stdout
    rows = {line.split("│")[1].strip(): line for line in shown_text.splitlines()
            if line.startswith("│")}
    assert "cancelled" in rows["work"] and "skipped" in rows["more"]


def _timeline_rows(page: str) -> dict[str, str]:
    """Each stage's row of the (wide) timeline, as drawn."""
    wide = page.split('<svg class="timeline"', 1)[1].split("</svg>", 1)[0]
    return dict(re.findall(r'<g class="tl-row[^"]*" data-stage="([^"]+)">(.*?)</g>', wide, re.S))


def test_a_cancelled_runs_verdict_says_the_same_on_the_terminal_and_the_pages(stopped):
    """What it committed holds the contract; what it did not commit is not verified: neither
    the run page nor the stopped stage's page says the contract is broken."""
    said = seqline("verify", "cut", "--root", str(stopped["root"]))
    assert said.returncode == 1
    assert "The run did not commit every stage; what it committed holds the contract." in \
        " ".join(said.stdout.split())
    page = _once_verified(stopped["url"] + "/runs/cut", "<h2>Verify</h2>\n<p>")
    assert "the run did not commit every stage; what it committed holds the contract" in page
    assert "break the contract" not in page
    stage = _once_verified(stopped["url"] + "/runs/cut/stages/work", "problems")
    verified = stage.split('id="verified"')[1].split("</section>")[0]
    assert "not verified:" in verified and "breaks" not in verified
    assert "no committed output: the run was cancelled." in verified


def _once_verified(url: str, marker: str) -> str:
    """The page once it shows the verdict just saved (an unwatched page is kept up to 2 s)."""
    deadline = time.monotonic() + 10
    while marker not in (page := httpx.get(url).text):
        assert time.monotonic() < deadline, f"{url} never showed the verdict"
        time.sleep(0.5)
    return page
