"""Two runs of the demo (one epoch) diffed along source order: a changed preprocess keyword
shows as that parameter and the first record it changes; a rerun is identical."""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from seqline.orchestration.divergence import first_batch, first_divergences
from tests import commands
from tests.conftest import REPO
from tests.dashboard.conftest import Server

pytestmark = pytest.mark.e2e

DEMO = REPO / "data" / "seattle_weather"
RAIN_AT = 5.0  # run b's threshold: days with 0 < precipitation <= 5 mm flip to "no rain"
FEATURES = '''\
"""The demo's rain flag, with its threshold as a keyword."""

import pyarrow as pa
import pyarrow.compute as pc


def add_columns(batch: pa.RecordBatch, rain_at: float = 0.0) -> pa.RecordBatch:
    return batch.append_column("rained", pc.cast(
        pc.greater(batch.column("precipitation"), rain_at), pa.int64()))
'''
FN = 'params: {fn: "features:add_columns", batch_format: pyarrow}'


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """Runs a and b (b with fn_kwargs rain_at), then a again (a2), then a with its
    function's source changed but not what it does (c). b and a2 run every stage (no cache):
    a stage reused from a would be compared with itself."""
    folder = tmp_path_factory.mktemp("diff")
    shutil.copy(DEMO / "seattle-weather.csv", folder)
    (folder / "features.py").write_text(FEATURES)
    text = (DEMO / "pipeline.yaml").read_text().replace("epochs: 15", "epochs: 1")
    assert FN in text
    (folder / "a.yaml").write_text(text)
    (folder / "b.yaml").write_text(text.replace(
        FN, FN[:-1] + f", fn_kwargs: {{rain_at: {RAIN_AT}}}}}"))
    for pipeline, run_id in (("a", "a"), ("b", "b"), ("a", "a2"), ("a", "c")):
        if run_id == "c":
            (folder / "features.py").write_text(FEATURES + "# the same, said again\n")
        done = commands.seqline("-q", "run", str(folder / f"{pipeline}.yaml"), "--root",
                                str(folder / "root"), "--run-id", run_id,
                                *(["--no-cache"] if run_id in ("b", "a2") else []))
        assert done.returncode == 0, done.stderr
    for run_id in ("b", "a2"):
        shown = commands.seqline("runs", "show", run_id, "--root", str(folder / "root"),
                                 "--json")
        assert {s["status"] for s in json.loads(shown.stdout)["stages"]} == {"succeeded"}
    return folder / "root"


def _first_flipped() -> int:
    """The first seq whose rain flag the threshold changes, read from the CSV itself."""
    with open(DEMO / "seattle-weather.csv") as f:
        return next(seq for seq, row in enumerate(csv.DictReader(f))
                    if 0 < float(row["precipitation"]) <= RAIN_AT)


def test_a_changed_keyword_diverges_at_its_first_record(root):
    found = {d.stage: d for d in first_divergences(root, "a", "b")}
    assert found["examples"].identical  # upstream of the change
    features = found["features"]
    seq = _first_flipped()
    assert not features.identical and features.seq == seq and features.position == seq
    assert features.fields == {"rained": (1, 0)}
    batch = first_batch(root, "a", "b", seq)
    assert batch is not None and batch.index == 0  # a window's inputs reach the first batch


def test_a_rerun_is_identical(root):
    assert all(d.identical for d in first_divergences(root, "a", "a2"))
    assert first_batch(root, "a", "a2", None) is None


@pytest.fixture(scope="module")
def url(root) -> Iterator[str]:
    """The dashboard on the root, for the module's pages."""
    server = Server(root)
    try:
        yield server.url
    finally:
        server.stop()


def test_compare_page_shows_the_parameter_and_the_first_record(url):
    page = httpx.get(url + "/runs/b/compare", params={"with": "a"}).text
    assert "features.fn_kwargs.rain_at" in page
    assert "First divergence" in page
    assert f'/runs/b/lookup?seq={_first_flipped()}"' in page
    same = httpx.get(url + "/runs/a2/compare", params={"with": "a"}).text
    section = same.split("First divergence")[1].split("</table>")[0]
    assert "identical" in section and 'class="differs"' not in section


def _rows(page: str, table: str) -> dict[str, str]:
    """A compare table's rows by their heading (its first cell), the rest as text."""
    body = page.split(f'class="{table}')[1].split("</table>")[0]
    rows = {}
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip()
                 for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        if cells:
            rows[cells[0]] = " | ".join(cells[1:])
    return rows


def test_compare_shows_only_what_differs_unless_asked(url):
    def page(run: str, other: str, **more: str) -> str:
        return httpx.get(f"{url}/runs/{run}/compare", params={"with": other, **more}).text
    params = _rows(page("b", "a"), "params-diff")
    assert "features.fn_kwargs.rain_at" in params  # the one parameter that differs
    assert "features.batch_format" not in params  # the same in both: hidden
    runs = _rows(page("b", "a"), "compare compare-runs")
    assert "started" in runs and "pipeline" not in runs and "runner" not in runs
    shown = page("b", "a", same="shown")
    assert "features.batch_format" in _rows(shown, "params-diff")
    assert "pipeline" in _rows(shown, "compare compare-runs")
    assert 'href="?with=a"' in shown  # the toggle back, the other run kept
    assert re.search(r"\d+ rows the same in both hidden", page("b", "a"))


def test_compare_has_a_code_row_that_shows_a_changed_function(url):
    page = httpx.get(f"{url}/runs/c/compare", params={"with": "a"}).text
    stage = httpx.get(f"{url}/runs/c/stages/features/compare", params={"with": "a"}).text
    found = re.search(r'<tr class="differs code">\s*<td>code</td><td><code>features\.py '
                      r'([0-9a-f]{8})</code></td><td><code>features\.py ([0-9a-f]{8})</code>',
                      page)
    assert found and found.group(1) != found.group(2), page
    assert "function source changed (features.py)" in page
    assert "its input changed (upstream `features` ran again)" in page  # batches, after it
    assert "fn_kwargs" not in page  # no parameter differs
    assert "function source changed (features.py)" in stage
    code = re.search(r'<tr class="differs row-code"><th>code</th>(.*?)</tr>', stage, re.S)
    assert code and code.group(1).count("features.py") == 2
