"""The run inspector in headless Chromium (issue 34's acceptance), against a bot that ran
the console story and the Slack story (:mod:`tests.inspector_stories`).

A person signs in through the form after a 401; the list shows both conversations; a
conversation's page shows the plan, the approval with who gave it and how, each tool
call and the cost; a live run's page updates without a reload; the usage charts' figures
equal ``threadbot usage --json``; a fork starts a new thread that goes on from the chosen
point; a wrong ``Host`` gets 421; no page breaks its Content-Security-Policy or asks for
a file that is not there, and Back after a sign-out shows nothing kept. The pages'
screenshots in the README are taken here: with ``THREADBOT_SCREENSHOTS=DIR`` they are
written to ``DIR`` (``docs/``), else to the test's folder.
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
from tests.browser import signed_in_page as browser_signed_in
from tests.cli_harness import threadbot
from tests.conftest import wait_for
from tests.fakes.slack_api import BOT_USER_ID
from tests.inspector_stories import (
    CONSOLE_REQUEST,
    PRICE,
    SLACK_REQUEST,
    Stories,
    both_stories,
)
from tests.slack_harness import ALICE, CHANNEL

pytestmark = pytest.mark.timeout(300)


def shots(tmp_path: Path) -> Path:
    """Where the screenshots go (see the module docstring)."""
    chosen = os.environ.get("THREADBOT_SCREENSHOTS")
    return Path(chosen) if chosen else tmp_path


async def signed_in_page(browser: Any, stories: Stories, path: str) -> Any:
    """A page signed in through the form at ``path`` of the stories' inspector."""
    return await browser_signed_in(browser, stories.served.address, path)


async def started_after(stories: Stories) -> str:
    """The one conversation started after the two stories."""
    known = (stories.slack_conversation, stories.console_conversation)
    [started] = [c for c in await stories.ws.conversation_ids() if c not in known]
    return started


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


async def test_no_page_breaks_its_policy_and_back_after_signing_out_shows_nothing(
    browser: Any, settings: Settings
) -> None:
    async with both_stories(settings) as stories:
        page = await signed_in_page(browser, stories, "/inspector/")
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on(
            "response",
            lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None,
        )
        address = stories.served.address
        await page.goto(f"{address}/inspector/")
        await page.goto(f"{address}/inspector/usage")
        for by in ("day", "channel", "model"):
            await page.wait_for_selector(f"#chart-{by}[data-drawn]:not([data-drawn=failed])")
        conversation = f"{address}/inspector/conversations/{stories.slack_conversation}"
        await page.goto(conversation)
        await page.wait_for_selector("#live:not([hidden])")  # its script ran, its stream opened
        icon = await page.evaluate(
            "fetch(document.querySelector('link[rel=icon]').href).then(r => r.status)"
        )
        assert icon == 200
        assert problems == []

        async with page.expect_navigation():
            await page.click("form.who button")
        assert await page.inner_text("#notice") == "Signed out."
        back = await page.go_back()
        assert back is not None and back.status == 401  # asked again, not shown from a cache
        assert page.url == conversation
        assert await page.inner_text("h1") == "Sign-in needed"


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
        running = await started_after(stories)
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


async def test_a_fork_from_the_page_goes_on_in_a_new_thread_from_that_entry(
    browser: Any, settings: Settings, tmp_path: Path
) -> None:
    async with both_stories(settings) as stories:
        ws, model = stories.ws, stories.model
        page = await signed_in_page(
            browser, stories, f"/inspector/conversations/{stories.slack_conversation}"
        )
        # fork where Alice's answer to the question is in: the result of ask_user
        answered = page.locator("#timeline li[data-kind=tool_result]").filter(
            has=page.locator(".title code.tool", has_text="ask_user")
        )
        at = int(await answered.get_attribute("data-seq") or "0")
        asked_before = len(model.requests)
        model.add(
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "b.py", "content": "b\n"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Forked and fixed."})]),
        )
        async with page.expect_navigation():
            await answered.locator(f"button[data-fork='{at}']").click()
        forked = page.url.rsplit("/", 1)[1]
        assert forked not in (stories.slack_conversation, stories.console_conversation)

        # a new thread of the same channel says where it came from and who forked it
        def announced() -> list[dict[str, Any]]:
            return [
                m
                for m in ws.api.messages(CHANNEL)
                if m.get("user") == BOT_USER_ID and "Forked by operator dana" in m["text"]
            ]

        await wait_for(announced)
        [opening] = announced()
        assert f"entry {at}" in opening["text"]
        assert opening.get("thread_ts", opening["ts"]) == opening["ts"]  # a thread's root
        await wait_for(
            lambda: any("Forked and fixed." in m["text"] for m in ws.posts(opening["ts"]))
        )
        await page.wait_for_selector("#lifecycle.lifecycle-done", timeout=60_000)

        # its first model request held the journal up to that entry: the original's
        # request made right after it, with the fork's note last
        original_after = model.requests[2]  # plan, question, then the answer's turn
        first = model.requests[asked_before]
        assert first.messages[:-1] == original_after.messages[:-1]
        *kept, note = first.messages[-1]["content"]
        assert kept == original_after.messages[-1]["content"]
        assert note["text"].startswith("[threadbot: fork]") and f"entry {at}" in note["text"]
        # the original is untouched: it ended where it ended
        original = await ws.snapshot(stories.slack_root)
        assert original.journal[-1].entry.kind == "step_entered"
        assert not any("Forked and fixed." in m["text"] for m in ws.posts(stories.slack_root))


async def test_stop_on_the_page_stops_the_run_like_any_stop(
    browser: Any, settings: Settings
) -> None:
    async with both_stories(settings) as stories:
        ws, model = stories.ws, stories.model
        gated = ScriptedTurn(calls=[ScriptedCall("list_files", {"path": "."})])
        gated.gate = asyncio.Event()  # never set: the model call hangs until stopped
        model.add(ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Look"]})]), gated)
        root = await ws.mention("have a look around")
        approval = ws.reaction_body(ws.post(root, "📋 Plan (v1)")["ts"], "white_check_mark")
        await ws.deliver("events_api", approval)
        await asyncio.wait_for(gated.started.wait(), 60)
        running = await started_after(stories)
        page = await signed_in_page(browser, stories, f"/inspector/conversations/{running}")
        async with page.expect_navigation():
            await page.click("#stop button")
        await page.wait_for_selector("#lifecycle.lifecycle-cancelled", timeout=60_000)
        await wait_for(lambda: any("Stopped by operator dana" in m["text"] for m in ws.posts(root)))
        assert str((await ws.snapshot(root)).status) == "cancelled"
        [stop] = [
            e
            for e in await ws.app.store.audit.entries(conversation_id=running)
            if e.request_kind == "stop"
        ]
        assert (stop.user_id, stop.means, stop.outcome) == ("operator:dana", "inspector", "stopped")
