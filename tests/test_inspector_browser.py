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
from tests.cli_harness import threadbot
from tests.inspector_harness import OPERATOR, TOKEN
from tests.inspector_stories import Stories, both_stories

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
