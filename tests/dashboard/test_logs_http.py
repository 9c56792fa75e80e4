"""The log page over HTTP: filters in the address, errors only, escaping, refusals; the run
page's commands, the same lines as `seqline runs show`."""

from __future__ import annotations

import html
import re

import httpx
import pytest

from tests.dashboard.conftest import XSS, seqline

pytestmark = pytest.mark.e2e


def _rows(page: str) -> list[tuple[str, str, str]]:
    """(level, stage, message) of each line the page shows."""
    found = re.findall(r'<tr class="lv-(\w+)">.*?<td>(?:<a [^>]*>(.*?)</a>)?</td>\s*<td><span '
                       r'class="msg[^"]*">(.*?)</span>', page, re.S)
    return [(level, html.unescape(stage), html.unescape(message))
            for level, stage, message in found]


def test_log_page_shows_the_failed_stage_error_and_filters_in_the_address(server):
    page = httpx.get(server.url + "/runs/broken/logs").text
    rows = _rows(page)
    assert ("info", "read", "started") in rows
    [error] = [r for r in rows if r[0] == "error"]
    assert error[1] == "read" and "bad record" in error[2]
    assert 'href="/runs/broken/logs?level=error" id="errors-only">errors only (1)' in page
    errors = _rows(httpx.get(server.url + "/runs/broken/logs?level=error").text)
    assert errors == [error]
    warnings_up = _rows(httpx.get(server.url + "/runs/broken/logs?level=warning").text)
    assert {r[0] for r in warnings_up} <= {"warning", "error"} and error in warnings_up
    own = _rows(httpx.get(server.url + "/runs/broken/logs?stage=-").text)
    assert own and all(r[1] == "" for r in own)
    found = _rows(httpx.get(server.url + "/runs/broken/logs?q=BAD+RECORD").text)
    assert found == [error]
    none = httpx.get(server.url + "/runs/broken/logs?stage=read&q=no-such-text").text
    assert "No line matches these filters." in none and 'value="no-such-text"' in none


def test_log_page_escapes_what_the_run_logged(server):
    page = httpx.get(server.url + f"/runs/small/logs?stage={XSS}").text
    assert XSS not in page and html.escape(XSS) in page
    assert _rows(page) and all(r[1] == XSS for r in _rows(page))
    page = httpx.get(server.url + "/runs/broken/logs?q=<b>x</b>").text
    assert "<b>x</b>" not in page


@pytest.mark.parametrize(("path", "status"), [
    ("/runs/nosuch/logs", 404),
    ("/runs/..%2F..%2Fetc/logs", 404),
    ("/runs/broken/logs?level=loud", 400),
])
def test_log_page_refuses_unknown_runs_and_levels(server, path, status):
    assert httpx.get(server.url + path).status_code == status


def test_run_page_links_the_log_and_shows_the_commands_runs_show_prints(server, root):
    page = httpx.get(server.url + "/runs/broken").text
    assert 'href="/runs/broken/logs?level=error" id="log-errors"' in page
    assert 'href="/runs/broken/logs?stage=read"' in page
    shown = {m[0]: html.unescape(m[1]) for m in
             re.findall(r'id="command-(\w+)">(.*?)</code>', page)}
    printed = seqline("runs", "show", "broken", "--root", str(root)).stdout
    told = dict(t.split(": ", 1) for t in printed.splitlines()
                if t.startswith(("rerun: ", "resume: ")))
    assert shown == told and set(shown) == {"rerun", "resume"}
    assert f"--root {root}" in shown["rerun"]
    succeeded = httpx.get(server.url + "/runs/demo-a").text
    assert 'id="command-rerun"' in succeeded and 'id="command-resume"' not in succeeded
