"""The run inspector's actions (docs/architecture.md, "Rewind and fork"): "fork here" and
Stop on a conversation's page, through :mod:`tests.inspector_harness` against a bot built
in-process over the same store (a console conversation, a scripted model).

Every timeline item has its "fork here" form (``data-fork`` its ``seq``), an active
conversation's header its Stop form. A fork posted from the page is the fork
``threadbot fork`` makes, as the signed-in operator by the means ``inspector``: 303 to the
new conversation's page, whose thread the bot starts at once and whose first model
request holds the journal up to that entry (and the fork's note); that page says where
it came from, the original's lists it, and both say when it started, how long it ran
and what it cost as the list does. In a browser, a double click on "fork here" makes
one fork, two presses two. A stop posted from the page is any stop: it ends the run, the
thread says who stopped it, and the audit trail has it as the operator's; a stop of a
conversation that had ended is refused on the page (409) and in the audit trail, and
its thread is told nothing. A bad entry (recorded as a refused fork), an unknown
conversation and a missing CSRF token change nothing.
"""

from __future__ import annotations

import asyncio
import copy
import html
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.app import App, build
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.fork import fork_note
from core.vocabulary.entries import ToolResultEntry
from core.vocabulary.lifecycle import Lifecycle
from tests.browser import signed_in_page
from tests.conftest import wait_for
from tests.harness import Chat
from tests.inspector_harness import Served, inspector_served, with_operator
from tests.test_inspector_listing import Rows


def turn(name: str, **input: object) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall(name, dict(input))])


@dataclass
class Bot:
    """A bot and its inspector, over one store."""

    app: App
    model: ScriptedModel
    chat: Chat
    served: Served


@pytest.fixture
async def bot(settings: Settings) -> AsyncIterator[Bot]:
    model = ScriptedModel([])
    inspecting = with_operator(settings)
    app = await build(inspecting, model=model)
    await app.start()
    try:
        async with inspector_served(
            app.store,
            inspecting,
            redactor=app.redactor,
            commits=app.commits,
            stopper=app.hub.stopper,
        ) as served:
            yield Bot(app, model, Chat(app), served)
    finally:
        await app.close()


async def test_fork_here_starts_a_new_thread_from_that_entry_as_the_signed_in_operator(
    bot: Bot,
) -> None:
    bot.model.add(turn("list_files"), turn("finish", answer="Nothing here yet."))
    await bot.chat.mention("look around")
    original = await bot.chat.snapshot()
    assert original.status.lifecycle is Lifecycle.DONE
    at = next(r.seq for r in original.journal if isinstance(r.entry, ToolResultEntry))
    client = await bot.served.client()

    page = await client.get(f"/inspector/conversations/{original.id}")
    assert page.status == 200
    forks = re.findall(r'data-fork="(\d+)"', page.text)
    assert forks and str(at) in forks
    assert 'id="stop"' not in page.text  # the run has ended: nothing to stop

    bot.model.add(turn("finish", answer="Forked from the page."))
    answer = await client.post(f"/inspector/conversations/{original.id}/fork", {"at": str(at)})
    assert answer.status == 303
    new = answer.headers["Location"].rsplit("/", 1)[1]
    assert answer.headers["Location"] == f"/inspector/conversations/{new}"
    await wait_for(lambda: "Forked from the page." in bot.chat.out.getvalue())
    await bot.app.hub.settled()
    fork = await bot.app.store.journal.load(new)
    assert fork.status.lifecycle is Lifecycle.DONE
    assert (await client.get(answer.headers["Location"])).status == 200

    after_at, first = bot.model.requests[1], bot.model.requests[2]
    expected = copy.deepcopy(list(after_at.messages))
    note = {"type": "text", "text": f"[threadbot: fork] {fork_note('dana', at, cloned=False)}"}
    expected[-1] = {**expected[-1], "content": [*expected[-1]["content"], note]}
    assert list(first.messages) == expected
    said = bot.chat.said()
    assert f"🍴 Forked by operator dana from thread {bot.chat.thread} of console at entry {at}" in (
        " ".join(said)
    )
    (row,) = [e for e in await bot.app.store.audit.entries() if e.request_kind == "fork"]
    assert (row.conversation_id, row.request_id, row.user_id, row.means, row.outcome) == (
        original.id,
        str(at),
        "operator:dana",
        "inspector",
        "forked",
    )


async def test_a_bad_entry_an_unknown_conversation_or_no_csrf_token_forks_nothing(
    bot: Bot,
) -> None:
    bot.model.add(turn("finish", answer="Hello."))
    await bot.chat.mention("hi")
    original = await bot.chat.snapshot()
    client = await bot.served.client()
    path = f"/inspector/conversations/{original.id}/fork"

    past = await client.post(path, {"at": "999"})
    assert past.status == 400
    assert f"conversation {original.id} has no journal entry 999: its journal runs 1 to" in (
        past.text
    )
    assert (await client.post(path, {"at": "two"})).status == 400
    assert (await client.post(path, {"at": "0"})).status == 400
    unknown = await client.post("/inspector/conversations/nope/fork", {"at": "1"})
    assert unknown.status == 404 and "There is no conversation nope." in unknown.text
    assert (await client.post(path, {"at": "1"}, csrf=False)).status == 403
    assert [c.id for c in await bot.app.store.threads.conversations()] == [original.id]
    refused = [
        (e.conversation_id, e.request_id, e.user_id, e.means, e.outcome)
        for e in await bot.app.store.audit.entries()
        if e.request_kind == "fork"
    ]  # each refusal of a known conversation, none of the others
    assert refused == [
        (original.id, at, "operator:dana", "inspector", "refused") for at in ("999", None, "0")
    ]


async def test_stop_from_the_page_stops_the_run_like_any_stop(bot: Bot) -> None:
    bot.model.add(turn("propose_plan", steps=["Do it"]))
    await bot.chat.mention("do it")
    waiting = await bot.chat.snapshot()
    assert str(waiting.status) == "waiting(plan_approval)"
    client = await bot.served.client()
    page = await client.get(f"/inspector/conversations/{waiting.id}")
    assert f'data-stop="{waiting.id}"' in page.text

    answer = await client.post(f"/inspector/conversations/{waiting.id}/stop")
    assert answer.status == 303
    assert answer.headers["Location"] == f"/inspector/conversations/{waiting.id}"
    await bot.app.hub.settled()
    stopped = await bot.chat.snapshot()
    assert stopped.status.lifecycle is Lifecycle.CANCELLED
    assert "⏹ Stopped by operator dana." in bot.chat.said()
    assert 'id="stop"' not in (await client.get(answer.headers["Location"])).text

    said = list(bot.chat.said())
    for _ in range(2):  # stopped: nothing runs or waits, the page says so, every time
        again = await client.post(f"/inspector/conversations/{waiting.id}/stop")
        assert again.status == 409
        assert "Nothing to stop: it had ended (cancelled)." in again.text
    await bot.app.hub.settled()
    assert bot.chat.said() == said  # and the thread is told nothing
    stops = [
        (e.user_id, e.means, e.outcome, e.reason)
        for e in await bot.app.store.audit.entries(conversation_id=waiting.id)
        if e.request_kind == "stop"
    ]
    assert stops[0][:3] == ("operator:dana", "inspector", "stopped")
    refused = ("operator:dana", "inspector", "refused", "nothing to stop: it had ended (cancelled)")
    assert stops[1:] == [refused, refused]
    unknown = await client.post("/inspector/conversations/nope/stop")
    assert unknown.status == 404
    assert (
        await client.post(f"/inspector/conversations/{waiting.id}/stop", csrf=False)
    ).status == (403)


def fact(page: str, name: str) -> str:
    """The text of the header's ``<dd id=NAME>``, its tags left out."""
    found = re.search(rf'<dd id="{name}"[^>]*>(.*?)</dd>', page, re.S)
    assert found, f"no {name}"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


async def an_original_and_its_fork(bot: Bot, *, fork_turns: list[ScriptedTurn]) -> tuple[Any, str]:
    """A conversation run to its end, forked from the page at its first result (the fork
    then runs ``fork_turns``): the original's snapshot and the fork's id."""
    bot.model.add(turn("list_files"), turn("finish", answer="Nothing here yet."))
    await bot.chat.mention("look around")
    original = await bot.chat.snapshot()
    at = next(r.seq for r in original.journal if isinstance(r.entry, ToolResultEntry))
    bot.model.add(*fork_turns)
    client = await bot.served.client()
    answer = await client.post(f"/inspector/conversations/{original.id}/fork", {"at": str(at)})
    assert answer.status == 303, answer.text
    return original, answer.headers["Location"].rsplit("/", 1)[1]


async def test_a_fork_s_page_says_where_it_came_from_and_its_figures_are_the_list_s(
    bot: Bot,
) -> None:
    original, new = await an_original_and_its_fork(
        bot,
        fork_turns=[turn("propose_plan", steps=["Look again"])],  # it waits: runs on
    )
    at = next(r.seq for r in original.journal if isinstance(r.entry, ToolResultEntry))
    await wait_for(lambda: "Plan (v1)" in bot.chat.said()[-1])
    await bot.app.hub.settled()
    later = datetime.now(UTC) + timedelta(minutes=3)
    bot.served.inspector.clock = lambda: later  # one "now" for both pages
    client = await bot.served.client()

    page = (await client.get(f"/inspector/conversations/{new}")).text
    listed = Rows((await client.get("/inspector/")).text).rows

    link = (
        f'<a href="/inspector/conversations/{original.id}#seq-{at}"><code>{original.id}</code></a>'
    )
    assert f"Forked from {link} at entry {at} by operator dana" in page
    info = await bot.app.store.threads.info(new)
    assert info.created_at is not None
    for cid, shown in ((new, page), (original.id, None)):
        shown = shown or (await client.get(f"/inspector/conversations/{cid}")).text
        row = listed[cid]
        assert fact(shown, "started") == row["started"]
        assert fact(shown, "duration") == row["duration"]
        assert fact(shown, "cost") == row["cost"]
    # the fork: opened when it was forked, waiting (so counted to now), its own call alone
    assert listed[new]["started"] == info.created_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert listed[new]["duration"].endswith("so far")
    assert listed[new]["cost"] == "- (1 without a price)"  # the scripted model has no price
    assert listed[original.id]["cost"] == "- (2 without a price)"
    # the original's page lists its fork
    shown = (await client.get(f"/inspector/conversations/{original.id}")).text
    assert f'<li data-fork-conversation="{new}"><a href="/inspector/conversations/{new}">' in shown


async def signed_in(browser: Any, served: Served, path: str) -> Any:
    """A browser page signed in through the form, at ``path``."""
    return await signed_in_page(browser, served.address, path)


async def test_a_double_click_on_fork_here_forks_once_and_two_presses_fork_twice(
    bot: Bot, browser: Any
) -> None:
    bot.model.add(turn("list_files"), turn("finish", answer="Nothing here yet."))
    await bot.chat.mention("look around")
    original = await bot.chat.snapshot()
    at = next(r.seq for r in original.journal if isinstance(r.entry, ToolResultEntry))
    bot.model.add(turn("finish", answer="Forked once."), turn("finish", answer="Forked again."))
    path = f"/inspector/conversations/{original.id}"
    page = await signed_in(browser, bot.served, path)
    # the bot holds each fork it is asked for until the test lets it go on, so the
    # second press of a double click comes while the first waits for its answer
    gate, asked = asyncio.Event(), []
    open_fork = bot.app.store.forks.open_fork

    async def held(opening: Any) -> None:
        asked.append(opening.conversation_id)
        await gate.wait()
        await open_fork(opening)

    bot.app.store.forks.open_fork = held  # type: ignore[method-assign]

    async def forks() -> list[str]:
        await bot.app.hub.settled()
        return [c.id for c in await bot.app.store.threads.conversations() if c.id != original.id]

    button = page.locator(f"button[data-fork='{at}']")
    await button.scroll_into_view_if_needed()
    box = await button.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    await page.mouse.click(x, y)
    await wait_for(lambda: asked)  # the first press reached the bot, which holds it
    await page.mouse.click(x, y)  # the second press of a double click (a second request
    gate.set()  # would reach the bot long before the first fork's run is over)
    await page.wait_for_url(lambda url: url != bot.served.address + path)
    await wait_for(lambda: "Forked once." in bot.chat.out.getvalue())
    assert len(await forks()) == 1 and len(asked) == 1  # one fork for the double click

    await page.go_back()
    assert page.url == bot.served.address + path
    async with page.expect_navigation():
        await page.click(f"button[data-fork='{at}']")  # pressed again, on purpose
    await wait_for(lambda: "Forked again." in bot.chat.out.getvalue())
    assert len(await forks()) == 2
    forked = [e for e in await bot.app.store.audit.entries() if e.outcome == "forked"]
    assert len(forked) == 2
