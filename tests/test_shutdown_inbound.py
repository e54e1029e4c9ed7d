"""A graceful shutdown lets the events being handled finish before the store closes.

On SIGTERM the adapters stop receiving, then :meth:`bot.app.App.shutdown` and
:meth:`bot.app.App.close` run. An event that arrived just before is still on its way
through the hub; the shutdown waits for it (``shutdown_grace`` at most), so it is
recorded, and the store closes after it (seen under load in Socket Mode, before: the
event's write reached a closed store and a traceback was logged).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bot.app import build
from bot.settings import Settings
from core.models.scripted import ScriptedModel
from tests.conftest import wait_for
from tests.harness import Chat


async def test_an_event_being_handled_at_a_shutdown_is_recorded_before_the_store_closes(
    sqlite_settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="conversations.hub")
    app = await build(sqlite_settings, model=ScriptedModel([]))
    threads = app.store.threads
    open_conversation = threads.open_conversation
    reached, release = asyncio.Event(), asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        await release.wait()  # the mention is on its way when the shutdown comes
        return await open_conversation(*args, **kwargs)

    monkeypatch.setattr(threads, "open_conversation", held)
    await app.start()
    chat = Chat(app)
    mention = asyncio.create_task(chat.mention("look around", settle=False))
    await asyncio.wait_for(reached.wait(), 30)

    async def stop() -> None:
        await app.shutdown()
        await app.close()

    stopping = asyncio.create_task(stop())
    await wait_for(lambda: "1 event(s) still being handled" in caplog.text)
    assert not stopping.done()  # it waits for the event
    release.set()
    await asyncio.wait_for(mention, 30)  # recorded: no error from a closed store
    await asyncio.wait_for(stopping, 60)
    with sqlite3.connect(tmp_path / "threadbot.db") as db:
        assert db.execute("select key from deliveries").fetchall() == [(chat.thread,)]
