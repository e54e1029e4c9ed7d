"""A live conversation page served by one instance while another holds the run
(docs/architecture.md, "The run inspector" and "Several instances").

Two stores on one database (PostgreSQL, and a SQLite file): the bot runs on the first,
the inspector is served over the second, which hears nothing of the first's commits in
its process. The page's event stream still gets each entry the run journals, read from
the store at its poll.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import Settings
from conversations.render import render_event
from conversations.store.backends import open_store
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from tests.harness import Chat
from tests.inspector_harness import inspector_served, with_operator
from tests.test_inspector_timeline_page import Stream


@pytest.fixture(params=["sqlite", "postgresql"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The database both instances use."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    return str(request.getfixturevalue("postgres_url"))


async def test_a_run_held_by_another_instance_reaches_the_open_page(
    settings: Settings, make_app, shared_url: str
) -> None:
    settings.database_url = shared_url
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Write it"]})]),
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "a.txt", "content": "a\n"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Written."})]),
        ]
    )
    holder = await make_app(model)  # the instance that runs the conversation
    chat = Chat(holder)
    await chat.mention("write a.txt")
    (conversation,) = await holder.store.threads.conversations()
    cid = conversation.id
    waiting = (await holder.store.journal.load(cid)).last_seq

    elsewhere = await open_store(shared_url, render=render_event)  # the other instance's
    try:
        async with inspector_served(elsewhere, with_operator(settings)) as served:
            client = await served.client()
            stream = await Stream.open(client, cid, after=waiting)
            try:
                opening = await stream.until("status")
                assert opening[-1].data["lifecycle"] == "waiting"

                await chat.react(chat.bot_message("Plan"))  # journaled by the holder
                seen = await stream.until("status", lambda data: data["lifecycle"] == "done")
            finally:
                stream.close()
    finally:
        await elsewhere.close()

    snap = await holder.store.journal.load(cid)
    sent = [e.data["seq"] for e in seen if e.name == "item" and e.data["seq"] > waiting]
    assert list(dict.fromkeys(sent)) == [r.seq for r in snap.journal if r.seq > waiting]
    shown = "".join(e.data["html"] for e in seen if e.name == "item")
    assert 'data-kind="decision"' in shown and "console:alice" in shown
    assert ">write_file</code>" in shown and "Written." in shown
