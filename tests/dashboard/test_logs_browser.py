"""The log page in headless Chromium: from a failed run to its error in one click, filters
kept in the address, no sideways scrolling on a phone, no console error."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.dashboard.conftest import keep_screenshot

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_errors_only_is_one_click_from_a_failed_run(server, page):
    page.goto(server.url + "/runs/broken")
    page.click("#log-errors")
    expect(page.locator("table.log tbody tr")).to_have_count(1)
    expect(page.locator("table.log tbody tr")).to_contain_text("bad record")
    assert page.url.endswith("/runs/broken/logs?level=error")
    page.click("#all-levels")
    page.wait_for_url(server.url + "/runs/broken/logs")
    expect(page.locator("table.log tbody tr")).to_have_count(5)  # started, plan, error, ...
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


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [1400, 800, 400])
def test_screenshots_of_the_log_page_at_three_widths_light_and_dark(server, page, width,
                                                                     scheme):
    """For people to look at (`make screenshots`: build/screenshots/, never the repo); a
    phone never scrolls sideways, a traceback open or not."""
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)
    for name, path in {"logs": "/runs/broken/logs", "logs-demo": "/runs/demo-a/logs",
                       "logs-errors": "/runs/broken/logs?level=error"}.items():
        page.goto(server.url + path)
        keep_screenshot(page, f"{name}-{width}-{scheme}")
        assert not page.evaluate("document.documentElement.scrollWidth > innerWidth"), name
    assert page.problems == []
