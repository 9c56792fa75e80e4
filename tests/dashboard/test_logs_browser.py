"""The log page in headless Chromium: from a failed run to its error in one click, filters
kept in the address, no sideways scrolling on a phone, no console error."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_errors_only_is_one_click_from_a_failed_run(server, page):
    page.goto(server.url + "/runs/broken")
    page.click("#log-errors")
    expect(page.locator("table.log tbody tr")).to_have_count(1)
    expect(page.locator("table.log tbody tr")).to_contain_text("bad record")
    assert page.url.endswith("/runs/broken/logs?level=error")
    page.click("#all-levels")
    assert page.locator("table.log tbody tr").count() > 1
    page.select_option("select[name=stage]", "read")
    page.fill("input[name=q]", "started")
    page.click("form.filters button")
    expect(page.locator("table.log tbody tr")).to_have_count(1)
    assert "stage=read" in page.url and "q=started" in page.url
    assert page.problems == []


def test_log_page_does_not_scroll_sideways_at_400_px(server, page):
    page.set_viewport_size({"width": 400, "height": 800})
    page.goto(server.url + "/runs/broken/logs")
    expect(page.locator("table.log")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.locator("details.traceback summary").first.click()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert page.problems == []
