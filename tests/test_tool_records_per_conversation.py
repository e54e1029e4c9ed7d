"""Tool call records are keyed by conversation and ``tool_use_id`` (issue 10, acceptance 3).

A model's ids are unique within one conversation only: two conversations in one
database may use the same ids, and each keeps its own records, results and
decisions. The scripted models number their calls from the history they are
given, so the ids are unique per conversation and the same after a restart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store import Store, migrate
from conversations.store.sql import SqlStore, create_engine
from core.models.base import Model, ModelRequest, ToolCallEvent
from core.models.demo import DemoModel
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn, ScriptFileModel
from core.vocabulary import lifecycle
from core.vocabulary.entries import AssistantTurn, ToolCall, ToolResultEntry
from core.vocabulary.errors import RequestConflict
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolCallRecord, ToolState
from tests.harness import Chat

ALICE = Person(id="console:alice", name="alice")
PLAN = ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Write notes"]})])


def plan() -> ScriptedTurn:
    return ScriptedTurn(calls=list(PLAN.calls))


def notes_and_cleanup(owner: str) -> ScriptedTurn:
    """A write that runs at once and a command that waits for approval, with fixed ids."""
    return ScriptedTurn(
        calls=[
            ScriptedCall("write_file", {"path": "notes.md", "content": owner}, id="toolu_same_1"),
            ScriptedCall("run_command", {"command": f"rm -rf {owner}-build"}, id="toolu_same_2"),
        ]
    )


def finish(answer: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer}, id="toolu_same_3")])


async def test_two_conversations_with_the_same_tool_ids_keep_separate_records(
    make_app,
) -> None:
    model = ScriptedModel(
        [plan(), notes_and_cleanup("ann"), plan(), notes_and_cleanup("bob"), finish("Bob's done.")]
    )
    app = await make_app(model)
    await app.start()
    chat = Chat(app)
    await chat.mention("write ann's notes")
    ann = chat.thread
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()
    await chat.mention("write bob's notes")
    bob = chat.thread
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()

    await chat.react(chat.bot_message("🔐 May I run"))  # bob's approval: allowed
    await app.hub.settled()

    chat.thread = bob
    bobs = await chat.snapshot()
    chat.thread = ann
    anns = await chat.snapshot()
    assert bobs.id != anns.id
    assert bobs.tool_calls["toolu_same_2"].state is ToolState.DONE
    assert bobs.status.lifecycle is lifecycle.Lifecycle.DONE
    assert anns.tool_calls["toolu_same_2"].state is ToolState.PENDING_APPROVAL
    assert str(anns.status) == "waiting(tool_approval)"
    assert anns.tool_calls["toolu_same_2"].input == {"command": "rm -rf ann-build"}
    assert (Path(anns.workspace) / "notes.md").read_text() == "ann"
    assert (Path(bobs.workspace) / "notes.md").read_text() == "bob"

    model.add(finish("Ann's done."))
    await chat.react(chat.bot_message("🔐 May I run", 0), "x")  # ann's: denied
    await app.hub.settled()

    anns = await chat.snapshot()
    assert anns.tool_calls["toolu_same_2"].state is ToolState.DENIED
    assert anns.status.lifecycle is lifecycle.Lifecycle.DONE
    for snap in (anns, await _other(chat, bob)):
        results = [
            r.entry.tool_use_id for r in snap.journal if isinstance(r.entry, ToolResultEntry)
        ]
        assert sorted(results) == sorted(set(results))  # one result per call
        assert {"toolu_same_1", "toolu_same_2", "toolu_same_3"} <= set(results)
    records = [
        (tool_use_id, conversation.id)
        for conversation in await app.store.threads.conversations()
        for tool_use_id in (await app.store.journal.load(conversation.id)).tool_calls
    ]
    rows = Counter(tool_use_id for tool_use_id, _ in set(records)).items()  # conversations per id
    assert {tool_use_id: n for tool_use_id, n in rows} == {
        "toolu_scripted_0_0": 2,  # the plans: ids numbered within each conversation
        "toolu_same_1": 2,
        "toolu_same_2": 2,
        "toolu_same_3": 2,
    }


async def _other(chat: Chat, thread: str) -> ConversationSnapshot:
    current, chat.thread = chat.thread, thread
    try:
        return await chat.snapshot()
    finally:
        chat.thread = current


# --- the store: every query on tool_calls names the conversation --------------------


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'records.db'}")
    await migrate.upgrade(engine)
    store = SqlStore(engine=engine, render=render_event)
    yield store
    await store.close()


async def _conversation(store: Store, thread: str) -> str:
    conversation_id = await store.threads.open_conversation(
        delivery_key=f"Ev{thread}",
        binding=PlatformRef(platform="slack", workspace="T1", channel="C1", thread=thread),
        requester=ALICE,
        workspace_root=Path("workspaces"),
        position="executing",
    )
    assert conversation_id is not None
    return conversation_id


def _gated(command: str, state: ToolState = ToolState.PENDING_APPROVAL) -> ToolCallRecord:
    return ToolCallRecord(
        tool_use_id="toolu_1",
        name="run_command",
        input={"command": command},
        read_only=False,
        state=state,
        turn_seq=1,
        index=0,
    )


async def test_a_decision_in_one_conversation_leaves_the_same_id_in_another_alone(
    store: Store,
) -> None:
    first, second = await _conversation(store, "1.0"), await _conversation(store, "2.0")
    for cid, command in ((first, "rm -rf a"), (second, "rm -rf b")):
        call = ToolCall(id="toolu_1", name="run_command", input={"command": command})
        await store.journal.commit(
            cid,
            Change(entries=(AssistantTurn(tool_calls=(call,)),), tool_calls=(_gated(command),)),
        )

    await store.journal.commit(second, Change(tool_calls=(_gated("rm -rf b", ToolState.APPROVED),)))

    waiting = lifecycle.waiting(lifecycle.WaitKind.TOOL_APPROVAL)
    await store.journal.commit(first, Change(status=waiting, guard_pending=("toolu_1",)))
    with pytest.raises(RequestConflict):
        await store.journal.commit(second, Change(status=waiting, guard_pending=("toolu_1",)))
    assert (await store.journal.load(first)).tool_calls[
        "toolu_1"
    ].state is ToolState.PENDING_APPROVAL
    assert (await store.journal.load(first)).tool_calls["toolu_1"].input == {"command": "rm -rf a"}
    assert (await store.journal.load(second)).tool_calls["toolu_1"].state is ToolState.APPROVED


# --- the scripted models' ids -----------------------------------------------------


def _history(turns: int) -> ModelRequest:
    """A request whose history holds ``turns`` assistant turns, each answered."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "alice: tidy up"}]
    for n in range(turns):
        use = {"type": "tool_use", "id": f"toolu_x_{n}", "name": "list_files", "input": {}}
        result = {"type": "tool_result", "tool_use_id": f"toolu_x_{n}", "content": "[]"}
        messages += [{"role": "assistant", "content": [use]}, {"role": "user", "content": [result]}]
    return ModelRequest(system="", messages=messages)


async def _ids(model: Model, request: ModelRequest) -> list[str]:
    events = [e async for e in model.stream(request)]
    return [e.id for e in events if isinstance(e, ToolCallEvent)]


async def test_scripted_ids_come_from_the_history_so_a_restart_reuses_none(tmp_path) -> None:
    two_calls = ScriptedTurn(calls=[ScriptedCall("list_files"), ScriptedCall("list_files")])
    script = tmp_path / "script.json"
    script.write_text('[{"calls": [{"name": "list_files"}]}, {"calls": [{"name": "list_files"}]}]')

    assert await _ids(ScriptedModel([two_calls]), _history(0)) == [
        "toolu_scripted_0_0",
        "toolu_scripted_0_1",
    ]
    assert await _ids(ScriptedModel([two_calls]), _history(3)) == [
        "toolu_scripted_3_0",
        "toolu_scripted_3_1",
    ]
    assert await _ids(ScriptFileModel(str(script)), _history(1)) == ["toolu_script_1_0"]
    assert await _ids(ScriptFileModel(str(script)), _history(1)) == ["toolu_script_1_0"]
    demo = await _ids(DemoModel(), _history(0))
    assert demo == await _ids(DemoModel(), _history(0)) and demo[0].startswith("toolu_demo_0_")
    assert (await _ids(DemoModel(), _history(2)))[0].startswith("toolu_demo_2_")
