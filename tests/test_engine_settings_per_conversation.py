"""The engine asks for each conversation's settings once per run (issue 13).

Two conversations run at the same time in one engine, each with its own model,
instructions, request lifetime and tool policy (what a channel's settings layers
give them): each model request, each request's expiry and each tool call's verdict
follows its own conversation's settings, never the other's.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.context import CountingIds, ManualClock, RunContext
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.policy.policy import Rule, RuleLayer, ToolPolicy
from core.run.engine import Engine
from core.run.settings import EngineSettings
from core.tools.base import Toolbox
from core.tools.control import control_tools
from core.tools.workspace import ListFiles
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.people import Person
from core.vocabulary.tool_records import ToolState
from core.workflows import default_workflow

ALICE = Person(id="U0ALICE001", name="alice")
START = datetime(2030, 5, 17, 9, 30, tzinfo=UTC)


async def opened(store: MemoryStore, name: str, workspace: Path) -> str:
    cid = await store.threads.open_conversation(
        delivery_key=f"m-{name}",
        binding=PlatformRef(platform="console", channel=name, thread=f"m-{name}"),
        requester=ALICE,
        workspace_root=workspace,
        position=default_workflow().start,
    )
    assert cid is not None
    return cid


async def test_two_conversations_at_once_each_run_with_their_own_settings(tmp_path: Path) -> None:
    store = MemoryStore(render=render_event)
    builds = await opened(store, "builds", tmp_path)
    docs = await opened(store, "docs", tmp_path)
    no_listing = ToolPolicy().with_layers(
        [RuleLayer(name="docs channel", rules=(Rule(tool="list_files", decision="deny"),))]
    )
    own = {
        builds: EngineSettings(model="model-builds", instructions="Builds.", request_ttl=60),
        docs: EngineSettings(
            model="model-docs", instructions="Docs.", request_ttl=7200, tool_policy=no_listing
        ),
    }
    asked: list[str] = []

    async def settings_for(conversation_id: str) -> EngineSettings:
        asked.append(conversation_id)
        return own[conversation_id]

    gate = asyncio.Event()
    listing = ScriptedCall("list_files", {"path": "."})
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[listing], gate=gate),
            ScriptedTurn(calls=[listing], gate=gate),
            *[ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": "Which?"})])] * 2,
        ]
    )
    engine = Engine(
        journal=store.journal,
        model=model,
        toolbox=Toolbox([*control_tools(), ListFiles()]),
        settings_for=settings_for,
        context=RunContext(clock=ManualClock(START), ids=CountingIds("req")),
    )

    runs = [
        asyncio.create_task(engine.start(cid, ThreadMessage(text="look", author=ALICE)))
        for cid in (builds, docs)
    ]
    while len(model.requests) < 2:  # noqa: ASYNC110  # both runs inside a model call at once
        await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*runs)

    by_model = {r.model: r for r in model.requests}
    assert set(by_model) == {"model-builds", "model-docs"}
    assert "\nBuilds.\n" in by_model["model-builds"].system
    assert "\nDocs.\n" in by_model["model-docs"].system
    assert "Docs." not in by_model["model-builds"].system
    for cid, ttl, listed in ((builds, 60, ToolState.DONE), (docs, 7200, ToolState.DENIED)):
        snap = await store.journal.load(cid)
        listings = [r.state for r in snap.tool_calls.values() if r.name == "list_files"]
        assert listings == [listed]
        (question,) = snap.requests
        assert question.expires_at == START + timedelta(seconds=ttl)
    assert sorted(asked) == sorted([builds, docs])  # once per run
