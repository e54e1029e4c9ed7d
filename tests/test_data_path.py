"""The data path: a run loads its conversation once and keeps it in memory while it goes on.

The story (mention, plan, approval, two tool calls, answer) runs on SQLite; the
store's journal is wrapped so that every load and commit is recorded against the
engine entry point (the run) that made it. A run after a person's answer loads
once and never again within it; a write beside a run (a decision that lands while
the run's allowed calls work) is caught by the journal's ``seq`` check and the
run goes on from a reload.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from bench._trace import StatementTrace
from bot.settings import Settings
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run import live, state
from core.vocabulary.entries import AssistantTurn, ToolCall, ToolResultEntry, UserText
from core.vocabulary.errors import RequestConflict
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.tool_records import ToolState
from tests.conftest import wait_for
from tests.harness import Chat

ALICE_P = Person(id="alice", name="alice")
ENTRY_POINTS = ("start", "reply", "run", "decide", "stop", "remind", "expire", "interrupt")


@pytest.fixture
def settings(sqlite_settings: Settings) -> Settings:
    return sqlite_settings


@dataclass
class Run:
    """One engine entry point call and what it did to the store."""

    name: str
    loads: int = 0
    commits: int = 0


@dataclass
class Recorder:
    """Every run of the engine, in order, with its loads and commits."""

    runs: list[Run] = field(default_factory=list)
    depth: int = 0

    def named(self, name: str) -> list[Run]:
        return [r for r in self.runs if r.name == name]


def record(app: Any) -> Recorder:
    """Wrap the engine's entry points and the store journal's load and commit."""
    recorder = Recorder()
    journal, engine = app.store.journal, app.engine

    def entry(name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            outer = recorder.depth == 0
            if outer:
                recorder.runs.append(Run(name))
            recorder.depth += 1
            try:
                return await method(*args, **kwargs)
            finally:
                recorder.depth -= 1

        return wrapped

    def counted(attr: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            if recorder.depth:  # not the test's own reads
                run = recorder.runs[-1]
                setattr(run, attr, getattr(run, attr) + 1)
            return await method(*args, **kwargs)

        return wrapped

    for name in ENTRY_POINTS:
        setattr(engine, name, entry(name, getattr(engine, name)))
    journal.load = counted("loads", journal.load)
    journal.commit = counted("commits", journal.commit)
    return recorder


def story_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Look", "Report"]})]),
            ScriptedTurn(
                text="Looking.",
                calls=[
                    ScriptedCall("list_files", {}),
                    ScriptedCall("read_file", {"path": "README.md"}),
                ],
            ),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "All done."})]),
        ]
    )


def build_model(*commands: str) -> ScriptedModel:
    """A plan, then one turn running ``commands``, then the answer "Built."."""
    return ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Build"]})]),
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": c}) for c in commands]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Built."})]),
        ]
    )


async def until_tool_approval(chat: Chat) -> str:
    """Mention, approve the plan, and wait for the tool approval it leads to; its id."""
    await chat.app.start()
    await chat.mention("build it")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    # the approval is posted while the allowed call runs
    await wait_for(lambda: "🔐 May I run this?" in chat.out.getvalue())
    return chat.bot_message("🔐 May I run this?")


async def test_a_story_reads_the_conversation_only_where_no_run_has_it(make_app, tmp_path) -> None:
    trace = StatementTrace()
    with trace.installed():  # every SQLite connection the app opens is traced
        await _story(make_app, tmp_path, trace)
    sql = [st.sql.lower() for st in trace.statements]
    assert any(q.startswith("insert into journal") for q in sql)
    assert not [q for q in sql if "max(journal.seq)" in q]  # the run knows its next seq


async def _story(make_app, tmp_path, trace: StatementTrace) -> None:
    app = await make_app(story_model())
    trace.recording = True
    recorder = record(app)
    chat = Chat(app)
    await app.start()
    (tmp_path / "workspaces").mkdir(exist_ok=True)

    await chat.mention("look around")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()

    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE
    assert [r.state for r in snap.tool_calls.values()].count(ToolState.DONE) >= 2
    assert "All done." in chat.out.getvalue()
    [started] = recorder.named("start")
    # started from the conversation as the mention opened it (no read); the request,
    # then the plan turn and the plan request it opens in one commit
    assert (started.loads, started.commits) == (0, 2)
    [decided] = recorder.named("decide")
    assert (decided.loads, decided.commits) == (1, 1)
    [after_answer] = recorder.named("run")
    # handed the conversation as the decision left it (no read); the turn, the two
    # read-only calls' results (unmarked while running, finished together: one
    # commit), the answer turn with its finish
    assert after_answer.loads == 0
    assert after_answer.commits == 3
    assert app.engine.loads == sum(r.loads for r in recorder.runs)


async def test_a_decision_landing_beside_a_run_is_caught_and_the_run_goes_on(
    make_app, tmp_path
) -> None:
    """Tool approval decided while the turn's allowed calls run: the decision's entries
    take the run's next ``seq``; the run's commit is refused as stale, it reloads and
    its result lands after the decision, numbered in order."""
    app = await make_app(build_model("rm -rf build", "sleep 1; echo built"))
    recorder = record(app)
    chat = Chat(app)
    approval = await until_tool_approval(chat)
    assert "ran `sleep" not in chat.out.getvalue()
    await chat.react(approval, "x")
    await app.hub.settled()

    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE, chat.out.getvalue()
    assert [r.seq for r in snap.journal] == list(range(1, len(snap.journal) + 1))
    states = {r.input["command"]: r.state for r in snap.tool_calls.values() if "command" in r.input}
    assert states == {"rm -rf build": ToolState.DENIED, "sleep 1; echo built": ToolState.DONE}
    kinds = [r.entry.kind for r in snap.journal]
    assert kinds.index("decision") < max(i for i, k in enumerate(kinds) if k == "tool_result")
    [run] = [r for r in recorder.runs if r.name == "run" and r.loads > 1] or [None]
    assert run is not None, "the run never reloaded: the decision did not land beside it"


async def test_a_late_decision_on_an_expired_approval_waits_for_the_run(
    make_app, settings: Settings
) -> None:
    """The approval's time runs out while the turn's allowed command runs; a ✅ after
    that expires it behind the run instead of beside it: every call gets one result,
    and the command's result is not written over a conversation already ended."""
    settings.request_ttl = 1.0
    chat = Chat(await make_app(build_model("sleep 2; echo built", "rm -rf junk")))
    approval = await until_tool_approval(chat)
    await asyncio.sleep(1.2)  # past the approval's time, the command still running
    await chat.react(approval)
    app = chat.app
    await app.hub.settled()

    snap = await chat.snapshot()
    results = [r.entry.tool_use_id for r in snap.journal if r.entry.kind == "tool_result"]
    assert sorted(results) == sorted(set(results)) and len(results) == 3  # plan, build, rm
    states = {r.input["command"]: r.state for r in snap.tool_calls.values() if "command" in r.input}
    assert states["sleep 2; echo built"] is ToolState.DONE
    assert states["rm -rf junk"] is not ToolState.DONE  # never ran
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    said = chat.out.getvalue()
    assert said.index("ran `sleep 2") < said.index("expired")


async def test_a_run_never_gives_a_call_a_second_result_after_a_write_beside_it(
    tmp_path,
) -> None:
    """The journal moved under the run (a stale commit) and the write beside it gave the
    run's call its result: the run's own result is refused, not renumbered in."""
    store = MemoryStore(render=render_event)
    cid = await store.threads.open_conversation(
        delivery_key="Ev1",
        binding=PlatformRef(platform="console", workspace="local", channel="c", thread="1"),
        requester=Person(id="alice", name="alice"),
        workspace_root=tmp_path,
        position="executing",
    )
    assert cid is not None
    call = ToolCall(id="toolu_1", name="run_command", input={"command": "make"})
    await store.journal.commit(cid, Change(entries=(AssistantTurn(tool_calls=(call,)),)))
    run = state.Run(conversation_id=cid, snapshot=await store.journal.load(cid))
    result = ToolResultEntry(tool_use_id="toolu_1", content="built")

    await store.journal.commit(  # beside the run: the call closed by someone else
        cid, Change(entries=(ToolResultEntry(tool_use_id="toolu_1", content="expired"),))
    )
    with pytest.raises(RequestConflict):
        await live.commit(run, store.journal, Change(entries=(result,)))
    await live.commit(run, store.journal, Change(entries=(UserText(author=ALICE_P, text="ok"),)))

    snap = await store.journal.load(cid)
    contents = [r.entry.content for r in snap.journal if isinstance(r.entry, ToolResultEntry)]
    assert contents == ["expired"]
    assert [r.seq for r in snap.journal] == [1, 2, 3]
