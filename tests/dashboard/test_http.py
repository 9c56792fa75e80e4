"""The dashboard over HTTP: safe by default, the JSON contract, Prometheus, no writes."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import commands
from tests.commands import EXE
from tests.dashboard.conftest import XSS, Server, seqline

pytestmark = pytest.mark.e2e


def test_foreign_host_header_gets_400(server):
    # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends its own Host.
    for host in ("evil.example", "127.0.0.1.evil.example", "localhost.:8765x"):
        answer = httpx.get(server.url + "/api/runs", headers={"Host": host})
        assert answer.status_code == 400, host
    assert httpx.get(server.url + "/api/runs", headers={"Host": "localhost"}).status_code == 200


@pytest.mark.parametrize("path", [
    "/runs/..%2F..%2Fetc%2Fpasswd",
    "/runs/demo-a/stages/..%2F..%2F..%2Fetc%2Fpasswd",
    "/runs/demo-a/stages/../../seqline.db",
    "/api/runs/demo-a/stages/%2e%2e%2f%2e%2e%2fseqline.db",
    "/static/../seqline.db",
    "/static/..%2F..%2F..%2Fstore%2Fstore.py",
    "/runs/demo-a/stages/nonexistent",
    "/api/runs/no-such-run",
])
def test_traversal_and_unknown_ids_get_404(server, path):
    answer = httpx.get(server.url + path)
    assert answer.status_code == 404, (path, answer.text[:200])
    assert "SQLite format" not in answer.text and "root:" not in answer.text


@pytest.mark.parametrize("method", ["POST", "DELETE", "PUT", "PATCH", "OPTIONS"])
def test_only_get_and_head_are_allowed(server, method):
    for path in ("/", "/api/runs", "/runs/demo-a", "/metrics", "/nowhere"):
        answer = httpx.request(method, server.url + path)
        assert answer.status_code == 405, (method, path)
        assert answer.headers["allow"] == "GET, HEAD"
    assert "access-control-allow-origin" not in httpx.get(
        server.url + "/api/runs", headers={"Origin": "http://evil.example"}).headers


def test_every_answer_carries_a_strict_csp(server):
    for path in ("/", "/runs/demo-a", "/api/runs", "/nowhere"):
        csp = httpx.get(server.url + path).headers["content-security-policy"]
        assert "default-src 'self'" in csp and "unsafe-inline" not in csp
    page = httpx.get(server.url + "/runs/demo-a").text
    assert "<style" not in page and " style=" not in page  # nothing inline to allow
    assert "<script>" not in page  # only <script src=…>


def test_markup_in_names_and_dead_letters_is_escaped(server):
    run_page = httpx.get(server.url + "/runs/small").text
    assert XSS not in run_page and "&lt;script&gt;alert(1)&lt;/script&gt;" in run_page
    stage = httpx.get(server.url + "/runs/small/stages/" + XSS).text
    assert XSS not in stage
    assert stage.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 2  # the name and the row


def test_a_tokenless_non_loopback_bind_exits_2(root):
    done = commands.seqline("dashboard", "--root", str(root), "--host", "0.0.0.0", "--port", "0",
                            timeout=60)
    assert done.returncode == 2
    assert "--token-file" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_token_is_required_when_given(root, tmp_path):
    token = "s3cret-" + "x" * 20
    (tmp_path / "token").write_text(token + "\n")
    guarded = Server(root, "--token-file", str(tmp_path / "token"))
    try:
        assert httpx.get(guarded.url + "/api/runs").status_code == 401
        assert httpx.get(guarded.url + "/api/runs",
                         headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(guarded.url + "/api/runs",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 200
        with httpx.Client(base_url=guarded.url) as browser:
            landed = browser.get(f"/runs/demo-a?token={token}")
            assert landed.status_code == 303 and landed.headers["location"] == "/runs/demo-a"
            assert "HttpOnly" in landed.headers["set-cookie"]
            assert browser.get("/runs/demo-a").status_code == 200  # the cookie now
    finally:
        guarded.stop()


def test_api_run_is_runs_show_json(server, root):
    shown = seqline("runs", "show", "demo-b", "--json", "--root", str(root))
    assert shown.returncode == 0, shown.stderr
    served, printed = httpx.get(server.url + "/api/runs/demo-b").json(), json.loads(shown.stdout)
    assert served.keys() == printed.keys()
    for key in served:  # one key at a time: a failure names what differs
        assert (key, served[key]) == (key, printed[key])
    listed = httpx.get(server.url + "/api/runs", params={"pipeline": "seattle_weather"}).json()
    assert [r["run_id"] for r in listed] == ["demo-b", "demo-a"]
    failed = httpx.get(server.url + "/api/runs", params={"status": "failed"}).json()
    assert [r["run_id"] for r in failed] == ["broken"]


def test_stage_api_pages_shards_and_dead_letters(server):
    features = httpx.get(server.url + "/api/runs/demo-a/stages/features").json()
    assert [s["seq_first"] for s in features["shards"]["rows"]] == [0, 256, 512, 768, 1024,
                                                                     1280]
    assert features["shards"]["rows"][-1]["seq_last"] == 1460
    small = httpx.get(server.url + f"/api/runs/small/stages/{XSS}").json()
    assert small["dead_letters"]["total"] == 1
    letter = small["dead_letters"]["rows"][0]
    assert (letter["seq"], letter["line"], letter["raw"]) == (2, 4, XSS)
    model = httpx.get(server.url + "/api/runs/demo-a/stages/model").json()
    assert len(model["training"]["epochs"]) == 15 and model["training"]["audit"][0]["seq_digest"]
    assert model["training"]["batches"]["rows"][0]["first"] == 14


def test_the_batch_order_is_a_picture_of_every_batch_of_the_epoch(server):
    """Drawn from the manifest's audit: all of the epoch's batches, not the table's page."""
    model = httpx.get(server.url + "/api/runs/demo-a/stages/model").json()["training"]
    picture = model["batches"]["picture"]
    assert picture["batches"] == model["batches"]["total"] == 37  # 1,155 windows, 32 a batch
    assert (picture["gaps"], picture["backs"], picture["first"]) == (0, 0, 14)
    assert [b["kind"] for b in picture["bars"]] == ["ok"] * picture["batches"]
    page = httpx.get(server.url + "/runs/demo-a/stages/model").text
    assert page.count('class="bo-ok"') == picture["batches"]
    assert "each batch goes on where the one before ended" in page


def test_the_epoch_table_adds_up_to_the_input_wait_share(server):
    """The share over the table is its "all" row's wait over its seconds, and that row is
    the sum of the epochs' rows (each row rounds a few milliseconds to 0.00 s)."""
    training = httpx.get(server.url + "/api/runs/demo-a/stages/model").json()["training"]
    epochs = training["epochs"]
    seconds = sum(e["seconds"] for e in epochs)
    waited = sum(e["input_wait_seconds"] for e in epochs)
    assert training["seconds"] == pytest.approx(seconds)
    assert training["input_wait_seconds"] == pytest.approx(waited)
    assert training["input_wait_share"] == pytest.approx(waited / seconds)
    page = httpx.get(server.url + "/runs/demo-a/stages/model").text
    share = f"{training['input_wait_share'] * 100:.1f} %"
    assert f"<strong>{share}</strong> of the epochs' time the training steps waited for " \
           f"batches ({waited:.2f} s of {seconds:.2f} s)." in page
    total = page.split('<tr class="total">')[1].split("</tr>")[0]
    assert re.findall(r'<td class="num">([^<]*)</td>', total) == [f"{seconds:.2f} s",
                                                                  f"{waited:.2f} s"]


def test_a_symlink_out_of_the_root_is_refused(server, root, tmp_path):
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"seq": 0, "reason": "outside", "raw": "SECRET"}\n')
    letters = root / "runs" / "demo-a" / "read" / "dead_letters.jsonl"
    letters.symlink_to(secret)
    try:
        answer = httpx.get(server.url + "/api/runs/demo-a/stages/read")
        assert answer.status_code == 404 and "SECRET" not in answer.text
        assert httpx.get(server.url + "/runs/demo-a/stages/read").status_code == 404
    finally:
        letters.unlink()
    assert httpx.get(server.url + "/api/runs/demo-a/stages/read").status_code == 200


def test_metrics_parse_with_prometheus_client(server):
    text = httpx.get(server.url + "/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in ("seqline_runs", "seqline_records", "seqline_stage_seconds",
                 "seqline_wait_seconds", "seqline_blocks_in_flight", "seqline_eval_metric"):
        assert name in families, name
    samples = [s for f in families.values() for s in f.samples]
    assert all("run_id" not in s.labels for s in samples)
    runs = {(s.labels["pipeline"], s.labels["status"]): s.value
            for s in families["seqline_runs"].samples}
    assert runs[("seattle_weather", "succeeded")] == 2 and runs[("failing", "failed")] == 1
    records = {(s.labels["stage"], s.labels["outcome"]): s.value
               for s in families["seqline_records"].samples if s.labels["pipeline"] == "small"}
    assert records[(XSS, "dead_lettered")] == 1 and records[(XSS, "out")] == 3


def test_a_killed_run_shows_interrupted_without_a_write(server, root, folder):
    driver = subprocess.Popen([EXE, "run", str(folder / "slow.yaml"), "--root", str(root),
                               "--run-id", "killed", "--no-cache"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = httpx.get(server.url + "/api/runs/killed")
        if answer.status_code == 200 and answer.json()["status"] == "running" and any(
                s["status"] == "running" for s in answer.json()["stages"]):
            break
        time.sleep(0.3)
    else:
        pytest.fail("the run was never seen running")
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    shown = httpx.get(server.url + "/api/runs/killed").json()
    assert shown["status"] == "interrupted"
    assert "interrupted" in httpx.get(server.url + "/runs/killed").text
    with sqlite3.connect(root / "seqline.db") as db:  # the dashboard derived it; it wrote nothing
        stored = db.execute("SELECT status FROM runs WHERE run_id = 'killed'").fetchone()
    assert stored == ("running",)


def test_sigterm_stops_the_server_with_a_stream_open(root, folder):
    running = Server(root)
    driver = subprocess.Popen([EXE, "run", str(folder / "slow.yaml"), "--root", str(root),
                               "--run-id", "streamed", "--no-cache"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while httpx.get(running.url + "/api/runs/streamed").status_code != 200:
            assert time.monotonic() < deadline, "the run never showed up"
            time.sleep(0.2)
        with httpx.stream("GET", running.url + "/runs/streamed/events", timeout=10) as stream:
            assert stream.status_code == 200
            first = next(stream.iter_lines())
            assert first.startswith("retry:")  # the stream is open, the run still going
            took = running.stop()
        assert took < 6 and running.process.returncode is not None
    finally:
        driver.wait(timeout=120)


def test_two_whole_runs_compare_side_by_side(server):
    run_page = httpx.get(server.url + "/runs/demo-b").text
    assert 'href="/runs/demo-b/compare?with=demo-a"' in run_page  # the previous run, linked
    answer = httpx.get(server.url + "/runs/demo-b/compare")  # default: the previous run
    assert answer.status_code == 200
    csp = answer.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "<style" not in answer.text
    page = answer.text
    assert "demo-a" in page and "demo-b" in page
    assert page.count('class="status st-cached"') >= 5  # demo-b's stages came from the cache
    every = httpx.get(server.url + "/runs/demo-b/compare?same=shown").text  # the same rows too
    assert "evaluation" in every and "blessed" in every  # evaluation metrics, both sides
    # Every stage appears, each linking to its own stage comparison.
    shown = httpx.get(server.url + "/api/runs/demo-a").json()["stages"]
    for stage in shown:
        assert f'/runs/demo-b/stages/{stage["name"]}/compare?with=demo-a' in page


def test_the_run_page_asks_where_a_seq_is(server):
    run_page = httpx.get(server.url + "/runs/demo-a").text
    assert 'action="/runs/demo-a/lookup"' in run_page and 'name="seq"' in run_page
    answer = httpx.get(server.url + "/runs/demo-a/lookup", params={"seq": "100"})
    assert answer.status_code == 200
    assert "seattle-weather.csv, line 102" in answer.text  # the header is line 1


def test_run_compare_escapes_names_and_refuses_unknown_runs(server):
    page = httpx.get(server.url + "/runs/small/compare?with=demo-a").text
    assert XSS not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert httpx.get(server.url + "/runs/small/compare?with=nope").status_code == 404
    assert httpx.get(server.url + "/runs/nope/compare?with=small").status_code == 404
    first = httpx.get(server.url + "/runs/demo-a/compare")  # nothing before it to compare
    assert first.status_code == 404 and "?with=RUN_ID" in first.text


def test_answers_are_gzipped_but_event_streams_are_not(server):
    gzip = {"Accept-Encoding": "gzip"}
    for path in ("/", "/runs/demo-a", "/runs/demo-a/stages/features", "/api/runs",
                 "/api/runs/demo-a/samples", "/static/uPlot.iife.min.js", "/metrics"):
        answer = httpx.get(server.url + path, headers=gzip)
        assert answer.status_code == 200, path
        assert answer.headers.get("content-encoding") == "gzip", path
        assert "default-src 'self'" in answer.headers["content-security-policy"], path
    plain = httpx.get(server.url + "/runs/demo-a", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and "<html" in plain.text
    with httpx.stream("GET", server.url + "/runs/demo-a/events", headers=gzip,
                      timeout=10) as stream:  # an ended run: its stream says so, then ends
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in stream.headers
        assert "event: end" in stream.read().decode()
