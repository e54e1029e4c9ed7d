"""The run inspector's actions (docs/architecture.md, "Rewind and fork"): "fork here" and
Stop on a conversation's page, through :mod:`tests.inspector_harness` against a bot built
in-process over the same store (a console conversation, a scripted model).

Every timeline item has its "fork here" form (``data-fork`` its ``seq``), an active
conversation's header its Stop form. A fork posted from the page is the fork
``threadbot fork`` makes, as the signed-in operator by the means ``inspector``: 303 to the
new conversation's page, whose thread the bot starts at once and whose first model
request holds the journal up to that entry (and the fork's note). A stop posted from the
page is any stop: it ends the run, the thread says who stopped it, and the audit trail
has it as the operator's. A bad entry, an unknown conversation and a missing CSRF token
change nothing.
"""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from bot.app import App, build
from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.fork import fork_note
from core.vocabulary.entries import ToolResultEntry
from core.vocabulary.lifecycle import Lifecycle
from tests.conftest import wait_for
from tests.harness import Chat
from tests.inspector_harness import Served, inspector_served, with_operator


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
    assert [e for e in await bot.app.store.audit.entries() if e.request_kind == "fork"] == []


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

    again = await client.post(f"/inspector/conversations/{waiting.id}/stop")  # stopped
    assert again.status == 303
    await bot.app.hub.settled()
    stops = [
        (e.user_id, e.means, e.outcome, e.reason)
        for e in await bot.app.store.audit.entries(conversation_id=waiting.id)
        if e.request_kind == "stop"
    ]
    assert stops[0][:3] == ("operator:dana", "inspector", "stopped")
    assert stops[1] == ("operator:dana", "inspector", "refused", "the run had already ended")
    unknown = await client.post("/inspector/conversations/nope/stop")
    assert unknown.status == 404
    assert (
        await client.post(f"/inspector/conversations/{waiting.id}/stop", csrf=False)
    ).status == (403)
