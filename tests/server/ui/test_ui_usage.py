"""The usage page in a real headless Chromium: a conversation observed by a scripted LLM observer
whose responses carry usage, and the chart and table of model calls per role that the page draws
from the cost ledger (``Memory.usage``)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx

import pytest
from playwright.sync_api import Browser, Page

from obsmem.calls import UsageReport
from obsmem.models import Usage
from obsmem.models.testing import ScriptedModel
from tests.server.ui_env import UiEnv, open_ui_env, sign_in

OBSERVATIONS = "<observations>\nDate: Jun 15, 2025\n* 🔴 (09:01) User talked about their trip.\n</observations>"
PER_CALL = Usage(input_tokens=1200, output_tokens=80, cached_input_tokens=500)


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiEnv]:
    observer = ScriptedModel([OBSERVATIONS], repeat_last=True, usage_per_call=PER_CALL)
    with open_ui_env(tmp_path_factory.mktemp("ui"), turns=12, observer=observer, reflector="offline") as env:
        yield env


@pytest.fixture(scope="module")
def page(browser: Browser, ui: UiEnv) -> Iterator[Page]:
    opened = browser.new_page()  # one signed-in page for the module (the browser: this folder's conftest)
    sign_in(opened, ui.url, ui.keys.alice)
    yield opened
    opened.close()


def test_the_usage_chart_shows_the_observers_calls(page: Page, ui: UiEnv) -> None:
    report: UsageReport = ui.live.call(ui.memory.usage(resource_id="alice"))
    observer = [row for row in report.by("day", "role") if row.role == "observer"]
    assert observer and sum(row.calls for row in observer) >= 1
    page.goto(ui.url + "/ui/usage")
    chart = page.locator("svg.usage-chart")
    assert "observer" in (chart.get_attribute("data-roles") or "").split()
    shown = chart.locator("g.panel rect.bar[data-role=observer]").evaluate_all(
        "els => els.map(e => [e.closest('g.panel').dataset.measure, e.dataset.day, Number(e.dataset.value)])"
    )
    for row in observer:
        assert ["calls", row.day, row.calls] in shown
        assert ["input_tokens", row.day, row.input_tokens] in shown
        assert ["cached_input_tokens", row.day, row.cached_input_tokens] in shown
        assert ["output_tokens", row.day, row.output_tokens] in shown
        assert row.input_tokens == row.calls * PER_CALL.input_tokens  # the scripted usage, as the ledger kept it
    assert page.get_by_role("group", name="Model calls per role and day", exact=False).count() == 1
    # the same numbers in the table under the chart
    table = page.locator("table", has=page.locator("caption", has_text="Model calls per day and role"))
    cells = [r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()]
    observed = [c for c in cells if c[1] == "observer"]
    assert [(c[0], int(c[2].replace(",", "")), int(c[4].replace(",", ""))) for c in observed] == [
        (row.day, row.calls, row.input_tokens) for row in observer
    ]
    total = report.total()
    assert cells[-1][0] == "Total" and int(cells[-1][2].replace(",", "")) == total.calls
    # the window: the last 30 days unless chosen; every call here was made today
    assert page.get_by_label("Days").input_value() == "30"
    for days in ("7", "0"):
        page.get_by_label("Days").select_option(days)
        with page.expect_navigation():
            page.locator("#calls-heading ~ form").get_by_role("button", name="Show").click()
        assert f"days={days}" in page.url
        assert page.locator("svg.usage-chart g.panel[data-measure=calls] rect.bar[data-role=observer]").evaluate_all(
            "els => els.map(e => Number(e.dataset.value))"
        ) == [row.calls for row in observer]


def test_another_resources_key_sees_none_of_these_calls(ui: UiEnv) -> None:
    with httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": ui.keys.bob}, timeout=60) as client:
        shown = client.get("/ui/usage")
        assert shown.status_code == 200 and "usage-chart" not in shown.text and "observer" not in shown.text
    with httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": ui.keys.globex}, timeout=60) as client:
        assert client.get("/ui/usage", params={"resource_id": "alice"}).status_code == 404
    with httpx.Client(base_url=ui.url, cookies={"obsmem_ui_key": ui.keys.acme_org}, timeout=60) as client:
        shown = client.get("/ui/usage", params={"resource_id": "alice"})
        assert shown.status_code == 200 and 'data-roles="observer"' in shown.text
