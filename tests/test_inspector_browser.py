"""The run inspector in headless Chromium (issue 34's acceptance), against a bot that ran
the console story and the Slack story (:mod:`tests.inspector_stories`).

A person signs in through the form after a 401; the list shows both conversations; a
conversation's page shows the plan, the approval with who gave it and how, each tool
call and the cost; a live run's page updates without a reload; the usage charts' figures
equal ``threadbot usage --json``; a fork starts a new thread that goes on from the chosen
point; a wrong ``Host`` gets 421. The pages' screenshots in the README are taken here:
with ``THREADBOT_SCREENSHOTS=DIR`` they are written to ``DIR`` (``docs/``), else to the
test's folder.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedTurn
from tests.cli_harness import threadbot
from tests.inspector_harness import OPERATOR, TOKEN
from tests.inspector_stories import (
    CONSOLE_REQUEST,
    PRICE,
    SLACK_REQUEST,
    Stories,
    both_stories,
)
from tests.slack_harness import ALICE

pytestmark = pytest.mark.timeout(300)


def shots(tmp_path: Path) -> Path:
    """Where the screenshots go (see the module docstring)."""
    chosen = os.environ.get("THREADBOT_SCREENSHOTS")
    return Path(chosen) if chosen else tmp_path


async def signed_in_page(browser: Any, stories: Stories, path: str) -> Any:
    """A new browser page that asked for ``path``, got the 401, followed its sign-in link
    and signed in; it is at ``path`` now."""
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    response = await page.goto(stories.served.address + path)
    assert response is not None and response.status == 401
    await page.click("#sign-in")
    await page.fill("input[name=operator]", OPERATOR)
    await page.fill("input[name=token]", TOKEN)
    async with page.expect_navigation():
        await page.click("form.sign-in button")
    assert page.url == stories.served.address + path
    return page


def usage_json(database_url: str, cwd: Path, by: str) -> dict[str, Any]:
    """What ``threadbot usage --json --by BY`` prints for the database."""
    done = threadbot(
        cwd, "usage", "--json", "--by", by, env={"THREADBOT_DATABASE_URL": database_url}
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_the_usage_charts_figures_equal_threadbot_usage(
    browser: Any, settings: Settings, tmp_path: Path
) -> None:
    async with both_stories(settings) as stories:
        page = await signed_in_page(browser, stories, "/inspector/usage")
        url = stories.served.inspector.settings.database_url
        for by in ("day", "channel", "model"):
            await page.wait_for_selector(f"#chart-{by}[data-drawn]:not([data-drawn=failed])")
            printed = await asyncio.to_thread(usage_json, url, tmp_path, by)
            rows = await page.eval_on_selector_all(
                f"table[data-usage={by}] tbody tr[data-key]",
                """rows => rows.map(r => ({
                    key: r.dataset.key,
                    calls: Number(r.querySelector('[data-calls]').dataset.calls),
                    tokens: Number(r.querySelector('[data-tokens]').dataset.tokens),
                    cost: r.querySelector('[data-cost-micro-usd]').dataset.costMicroUsd,
                }))""",
            )
            assert rows == [
                {
                    "key": line["key"],
                    "calls": line["calls"],
                    "tokens": line["tokens"],
                    "cost": str(line["cost_micro_usd"]),
                }
                for line in printed["lines"]
            ]
            drawn = await page.evaluate(f"window.usageCharts[{by!r}].data")
            assert [round(c * 1_000_000) for c in drawn[1]] == [
                line["cost_micro_usd"] for line in printed["lines"]
            ]
            assert drawn[2] == [line["tokens"] for line in printed["lines"]]
        assert printed["total"]["cost_micro_usd"] > 0  # every call priced
        await page.screenshot(path=str(shots(tmp_path) / "inspector-usage.png"), full_page=True)


async def test_without_a_session_401_and_by_another_host_name_421(
    browser: Any, settings: Settings
) -> None:
    async with both_stories(settings, inspector_hosts=["localhost"], ops_host="localhost") as st:
        port = st.served.address.rsplit(":", 1)[1]
        page = await browser.new_page()
        by_name = await page.goto(f"http://localhost:{port}/inspector/")
        assert by_name is not None and by_name.status == 401
        assert await page.inner_text("#sign-in") == "Sign in"
        by_address = await page.goto(f"http://127.0.0.1:{port}/inspector/")
        assert by_address is not None and by_address.status == 421
        assert "misdirected" in await page.inner_text("body")


async def test_the_list_shows_both_and_a_page_shows_plan_approval_calls_and_cost(
    browser: Any, settings: Settings, tmp_path: Path
) -> None:
    async with both_stories(settings) as stories:
        page = await signed_in_page(browser, stories, "/inspector/")
        rows = await page.eval_on_selector_all(
            "#conversations tr[data-conversation]", "rows => rows.map(r => r.dataset.conversation)"
        )
        assert sorted(rows) == sorted([stories.slack_conversation, stories.console_conversation])
        slack_row = page.locator(f"tr[data-conversation='{stories.slack_conversation}']")
        assert "slack" in await slack_row.inner_text()
        assert SLACK_REQUEST in await slack_row.inner_text()
        console_row = page.locator(f"tr[data-conversation='{stories.console_conversation}']")
        assert CONSOLE_REQUEST in await console_row.inner_text()
        await page.screenshot(path=str(shots(tmp_path) / "inspector-conversations.png"))

        async with page.expect_navigation():
            await slack_row.locator(f"a[href$='{stories.slack_conversation}']").first.click()
        timeline = page.locator("#timeline")
        plan = timeline.locator("li[data-kind=model_turn]").first
        assert "Plan v1" in await plan.inner_text()
        assert "Reproduce the flaky test" in await plan.inner_text()
        approval = await timeline.locator("li[data-kind=decision]").first.inner_text()
        assert ALICE in approval and "approved" in approval and "by reaction" in approval
        results = await timeline.locator("li[data-kind=tool_result]").all_inner_texts()
        tools = timeline.locator("li[data-kind=tool_result] .title code.tool")
        assert await tools.all_inner_texts() == ["propose_plan", "ask_user", "write_file", "finish"]
        arguments = await timeline.locator("div.call[data-tool=write_file]").text_content()
        assert arguments is not None and "conftest.py" in arguments  # its arguments, shown
        assert "one session per test" in arguments
        written = next(text for text in results if "write_file" in text)
        assert "wrote 23 bytes to conftest.py" in written
        # the cost: four priced calls of 100 in and 20 out at the price sheet's rates
        per_call = 100 * PRICE.input + 20 * PRICE.output  # micro-dollars
        assert await page.get_attribute("#cost", "data-micro-usd") == str(int(4 * per_call))
        assert await page.inner_text("#cost") == f"${4 * per_call / 1_000_000:.4f}"
        await page.screenshot(
            path=str(shots(tmp_path) / "inspector-conversation.png"), full_page=True
        )


async def test_a_running_conversations_page_updates_without_a_reload(
    browser: Any, settings: Settings
) -> None:
    async with both_stories(settings) as stories:
        ws, model = stories.ws, stories.model
        gate = asyncio.Event()
        gated = ScriptedTurn(calls=[ScriptedCall("list_files", {"path": "."})], gate=gate)
        model.add(
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Look"]})]),
            gated,
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Looked."})]),
        )
        root = await ws.mention("have a look around")
        approval = ws.reaction_body(ws.post(root, "📋 Plan (v1)")["ts"], "white_check_mark")
        await ws.deliver("events_api", approval)  # not settled: the run waits at the gate
        await asyncio.wait_for(gated.started.wait(), 60)
        [running] = [
            c
            for c in await ws.conversation_ids()
            if c not in (stories.slack_conversation, stories.console_conversation)
        ]
        page = await signed_in_page(browser, stories, f"/inspector/conversations/{running}")
        await page.evaluate("window.loadedOnce = true")  # gone if the page reloads
        assert await page.locator("#timeline li[data-kind=tool_result]").count() == 1
        await page.wait_for_selector("#live:not([hidden])")
        gate.set()
        await page.wait_for_selector(
            "#timeline li[data-kind=tool_result] >> text=finish", timeout=60_000
        )
        await page.wait_for_selector("#lifecycle.lifecycle-done", timeout=60_000)
        assert await page.evaluate("window.loadedOnce") is True
        called = page.locator("#timeline li[data-kind=tool_result] .title code.tool")
        assert await called.all_inner_texts() == ["propose_plan", "list_files", "finish"]
