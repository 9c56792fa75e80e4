"""Data profiles end to end: a pipeline run twice with one column shifted shows drift on that
column only, on the stage page's Profile section; `profile: false` keeps a stage unprofiled."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from seqline.orchestration.dashboard.files import manifest_of, profile_of
from seqline.orchestration.dashboard.profile_data import profile_view
from seqline.orchestration.store import RunReader
from seqline.orchestration.store.store import sqlite_url
from tests.dashboard.conftest import Server, seqline
from tests.s3 import S3, s3_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.e2e

MARKUP = "<b>fog</b>"  # a string value that is markup: shown as text
PIPELINE = """\
name: weather
stages:
  - {name: read, component: ingest, params: {format: csv, paths: [days.csv], block_records: 50}}
  - {name: examples, component: tfrecord_write, profile: false}
"""


def days(shift: float) -> str:
    """400 days: temp (shifted by `shift`), wind, and a weather word; seeded, no randomness."""
    words = ["sun", "rain", MARKUP, "sun", "drizzle"]
    rows = [f"{(i * 37 % 100) / 4 + shift},{(i * 13 % 50) / 10},\"{words[i % 5]}\""
            for i in range(400)]
    return "temp,wind,weather\n" + "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """Two runs of one pipeline: `before`, then `after` with temp +20."""
    folder = tmp_path_factory.mktemp("profile")
    (folder / "p.yaml").write_text(PIPELINE)
    for run_id, shift in (("before", 0.0), ("after", 20.0)):
        (folder / "days.csv").write_text(days(shift))
        done = seqline("run", str(folder / "p.yaml"), "--root", str(folder / "root"),
                       "--run-id", run_id, "--no-cache")
        assert done.returncode == 0, done.stderr
    return folder / "root"


@pytest.fixture(scope="module")
def server(root) -> Iterator[Server]:
    running = Server(root)
    yield running
    running.stop()


def test_profile_json_is_stored_with_the_stage(root):
    manifest = json.loads((root / "runs" / "after" / "read" / "manifest.json").read_text())
    assert manifest["profile"] == {"path": "profile.json"}
    stored = json.loads((root / "runs" / "after" / "read" / "profile.json").read_text())
    assert (stored["rows"], stored["seq_min"], stored["seq_max"]) == (400, 0, 399)
    assert sorted(stored["columns"]) == ["temp", "weather", "wind"]
    assert stored["columns"]["temp"]["min"] == 20.0
    assert len(stored["windows"]) == 8  # blocks of 50


def test_profile_false_turns_it_off(root):
    stage = root / "runs" / "after" / "examples"
    assert "profile" not in json.loads((stage / "manifest.json").read_text())
    assert not (stage / "profile.json").exists()


def test_drift_is_flagged_for_the_shifted_column_only(root):
    reader = RunReader.read_only(sqlite_url(root))
    try:
        manifest = json.loads((root / "runs" / "after" / "read" / "manifest.json").read_text())
        view = profile_view(reader, root, "after", "read", manifest)
        first = profile_view(reader, root, "before", "read", json.loads(
            (root / "runs" / "before" / "read" / "manifest.json").read_text()))
    finally:
        reader.close()
    assert view is not None and view["baseline"] == "before"
    drift = {c["name"]: c["drift"] for c in view["columns"]}
    assert [name for name, d in drift.items() if d["drifted"]] == ["temp"]
    assert float(drift["temp"]["distance"]) >= 0.75 and drift["weather"]["measure"] == "tv"
    assert first is not None and first["baseline"] is None  # nothing succeeded before it


def test_stage_page_shows_the_profile_section(server):
    page = httpx.get(server.url + "/runs/after/stages/read").text
    section = page[page.index("<h2>Profile</h2>"):]
    section = section[:section.index("</section>")]
    for name in ("temp", "wind", "weather"):
        assert f"<code>{name}</code>" in section
    assert section.count("st-failed\">drifted") >= 1 and "<svg class=\"histogram\"" in section
    row = re.search(r"<code>temp</code>.*?</tr>", section, re.S).group(0)
    assert "drifted" in row and "20" in row  # its min
    wind = re.search(r"<code>wind</code>.*?</tr>", section, re.S).group(0)
    assert "drifted</span>" not in wind.split("histogram")[-1].split("</td>")[1]
    assert MARKUP not in page and "&lt;b&gt;fog&lt;/b&gt;" in section
    assert "<style" not in page and " style=" not in page  # the CSP allows none
    examples = httpx.get(server.url + "/runs/after/stages/examples").text
    assert "Not profiled" in examples


def test_profile_is_stored_and_read_on_an_object_store(s3_server: S3, tmp_path,  # noqa: F811
                                                       monkeypatch):
    monkeypatch.setenv("SEQLINE_HOME", str(tmp_path / "home"))  # the store of a URL root
    (tmp_path / "p.yaml").write_text(PIPELINE)
    (tmp_path / "days.csv").write_text(days(0.0))
    s3_server.fs().mkdir("profiles")
    done = seqline("run", str(tmp_path / "p.yaml"), "--root", "s3://profiles/root",
                   "--run-id", "on-s3", "--workers", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = manifest_of("s3://profiles/root", "on-s3", "read")
    stored = profile_of("s3://profiles/root", "on-s3", "read", manifest)
    assert manifest is not None and manifest["profile"]["path"].startswith("profile")
    assert stored is not None and stored["rows"] == 400 and "temp" in stored["columns"]
