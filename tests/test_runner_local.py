"""The runner protocol with the local runner (issue 30): a run asked by request, streamed.

:class:`core.runner.local.LocalRunner` over an engine and a memory store: a run's
stream carries what each commit wrote (the run events the thread is shown, the
lifecycle), then :class:`RunEnded`; a reply that names the question it answers is
checked against the pending one (the verified resume) and, when that is no longer
pending, is taken as an ordinary message; a run that passes its deadline is cut (its
running call cancelled; a read-only one runs again in the next run) and goes on from
the journal later; leaving the stream, or :meth:`cancel`, stops a run at once; a run
whose runner is lost mid-run is sent again by the hub as its next attempt, from the
journal (docs/architecture.md, "Runners").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pydantic
import pytest

from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from core.models.base import ToolKind, ToolSpec
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.engine import Engine
from core.runner.local import LocalRunner
from core.runner.protocol import (
    RunEnded,
    RunItem,
    RunKind,
    Runner,
    RunnerLost,
    RunRequest,
    RunUpdate,
)
from core.tools.base import Toolbox, ToolContext, ToolOutput
from core.tools.control import control_tools
from core.vocabulary.entries import UserText
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.people import Person
from core.vocabulary.run_events import PlanProposed, QuestionAsked
from core.workflows import default_workflow
from tests.conftest import wait_for
from tests.harness import Chat
from tests.test_slack_story import finish

ALICE = Person(id="U0ALICE001", name="alice")


def ask(question: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("ask_user", {"question": question})])


def plan(*steps: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": list(steps)})])


class Slow:
    """A read-only tool that waits until cancelled (a command that runs long)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    @property
    def spec(self) -> ToolSpec:
        schema = {"type": "object", "properties": {}}
        return ToolSpec(
            name="slow", description="Waits.", input_schema=schema, kind=ToolKind.READ_ONLY
        )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.cancelled.set()
        raise AssertionError("never")


class Bench:
    """One conversation on a memory store and a local runner over an engine."""

    def __init__(self, tmp_path: Path, turns: list[ScriptedTurn], tools: list[Any] = ()) -> None:
        self.tmp_path = tmp_path
        self.store = MemoryStore(render=render_event)
        self.model = ScriptedModel(turns)
        engine = Engine(
            journal=self.store.journal,
            model=self.model,
            toolbox=Toolbox([*control_tools(), *tools]),
        )
        self.runner = LocalRunner(engine)
        self.cid = ""
        self.runs = 0

    async def open(self) -> str:
        cid = await self.store.threads.open_conversation(
            delivery_key="m-1",
            binding=PlatformRef(platform="console", channel="console", thread="m-1"),
            requester=ALICE,
            workspace_root=self.tmp_path / "workspaces",
            position=default_workflow().start,
        )
        assert cid is not None
        self.cid = cid
        return cid

    def request(self, kind: RunKind, text: str | None = None, **more: Any) -> RunRequest:
        self.runs += 1
        message = ThreadMessage(text=text, author=ALICE) if text is not None else None
        return RunRequest(
            conversation_id=self.cid, run_id=f"run-{self.runs}", kind=kind, message=message, **more
        )

    async def items(self, request: RunRequest) -> list[RunItem]:
        return [item async for item in self.runner.run(request)]


async def test_a_run_streams_what_it_commits_and_ends_waiting(tmp_path: Path) -> None:
    bench = Bench(tmp_path, [plan("Look around", "Say what is there")])
    await bench.open()
    items = await bench.items(bench.request(RunKind.START, "what is in the repo?"))
    *updates, end = items
    assert end == RunEnded(lifecycle=Lifecycle.WAITING)
    assert all(isinstance(u, RunUpdate) for u in updates)
    events = [e for u in updates if isinstance(u, RunUpdate) for e in u.events]
    assert [type(e) for e in events] == [PlanProposed]
    assert isinstance(events[0], PlanProposed) and events[0].steps == (
        "Look around",
        "Say what is there",
    )
    snap = await bench.store.journal.load(bench.cid)
    assert snap.status.lifecycle is Lifecycle.WAITING  # the stream told what the store holds
    assert next(u.lifecycle for u in updates if isinstance(u, RunUpdate)) is Lifecycle.RUNNING


async def test_a_reply_naming_the_pending_question_answers_it(tmp_path: Path) -> None:
    bench = Bench(tmp_path, [ask("Which branch?"), plan("Check out main")])
    await bench.open()
    await bench.items(bench.request(RunKind.START, "deploy it"))
    snap = await bench.store.journal.load(bench.cid)
    (question,) = snap.open_requests
    items = await bench.items(bench.request(RunKind.REPLY, "main", answers=question.id))
    snap = await bench.store.journal.load(bench.cid)
    answered = [r for r in snap.requests if r.id == question.id]
    assert answered[0].state.value == "decided"
    events = [e for u in items if isinstance(u, RunUpdate) for e in u.events]
    assert any(isinstance(e, PlanProposed) for e in events)  # the run went on with the answer
    assert len(bench.model.requests) == 2


async def test_a_reply_naming_a_request_no_longer_pending_is_an_ordinary_message(
    tmp_path: Path,
) -> None:
    bench = Bench(tmp_path, [ask("Which branch?")])
    await bench.open()
    await bench.items(bench.request(RunKind.START, "deploy it"))
    items = await bench.items(bench.request(RunKind.REPLY, "main", answers="req-stale"))
    snap = await bench.store.journal.load(bench.cid)
    (question,) = snap.open_requests  # still pending: the reply did not answer it
    notes = [r.entry for r in snap.journal if isinstance(r.entry, UserText)]
    assert (notes[-1].role, notes[-1].text) == ("note", "main")
    assert items[-1] == RunEnded(lifecycle=None)  # a note moves nothing
    assert len(bench.model.requests) == 1  # the model was not asked again
    assert not any(isinstance(e, QuestionAsked) for u in items[:-1] for e in u.events)  # type: ignore[union-attr]
    assert question.prompt == "Which branch?"


async def test_a_run_past_its_deadline_is_cut_and_goes_on_from_the_journal_later(
    tmp_path: Path,
) -> None:
    slow = Slow()
    turns = [ScriptedTurn(calls=[ScriptedCall("slow", {})])] * 2
    bench = Bench(tmp_path, turns, tools=[slow])
    await bench.open()
    # the tool never returns: the deadline finds it running unless the machine takes longer
    # than the deadline to reach it (a generous one: the test waits for it once)
    request = bench.request(RunKind.START, "wait for it", deadline=8)
    items = await bench.items(request)
    assert slow.cancelled.is_set()
    assert items[-1] == RunEnded(lifecycle=Lifecycle.RUNNING, deadline_passed=True)
    snap = await bench.store.journal.load(bench.cid)
    (record,) = snap.tool_calls.values()
    assert record.state.value == "approved"  # a read-only call cut: no result, it runs again
    assert snap.status.lifecycle is Lifecycle.RUNNING  # the next run goes on from the journal
    slow.started.clear()
    following = asyncio.create_task(bench.items(bench.request(RunKind.GO_ON)))
    await wait_for(slow.started.is_set)  # the call runs again
    following.cancel()
    await asyncio.wait({following})


async def test_leaving_the_stream_or_cancel_stops_the_run_at_once(tmp_path: Path) -> None:
    slow = Slow()
    turns = [ScriptedTurn(calls=[ScriptedCall("slow", {})])] * 2
    bench = Bench(tmp_path, turns, tools=[slow])
    await bench.open()

    async def follow(request: RunRequest) -> None:
        async for _item in bench.runner.run(request):
            pass

    following = asyncio.create_task(follow(bench.request(RunKind.START, "wait")))
    await wait_for(slow.started.is_set)
    following.cancel()  # the caller left: a stop
    await asyncio.wait({following})
    assert slow.cancelled.is_set()

    slow.started.clear()
    slow.cancelled.clear()
    request = bench.request(RunKind.GO_ON)
    following = asyncio.create_task(follow(request))
    await wait_for(slow.started.is_set)
    assert await bench.runner.cancel(request.run_id) is True
    assert slow.cancelled.is_set()
    await asyncio.wait({following})
    assert await bench.runner.cancel(request.run_id) is False  # nothing runs under it now


def test_a_request_that_lacks_what_its_kind_needs_is_refused() -> None:
    with pytest.raises(pydantic.ValidationError, match="needs the message"):
        RunRequest(conversation_id="c", run_id="r", kind=RunKind.START)
    with pytest.raises(pydantic.ValidationError, match="needs the request_id"):
        RunRequest(conversation_id="c", run_id="r", kind=RunKind.EXPIRE)
    with pytest.raises(pydantic.ValidationError, match="only a reply"):
        RunRequest(conversation_id="c", run_id="r", kind=RunKind.GO_ON, answers="req-1")
    with pytest.raises(pydantic.ValidationError):
        RunRequest(conversation_id="c", run_id="r", kind=RunKind.GO_ON, attempt=0)


class LostOnce:
    """A runner over the hub's own that is lost (:class:`RunnerLost`) once, after the
    first commit of its first run, as a Ray actor that dies mid-run; the requests it
    was asked, in order."""

    def __init__(self, inner: Runner) -> None:
        self.inner = inner
        self.asked: list[RunRequest] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(self, request: RunRequest) -> AsyncIterator[RunItem]:
        self.asked.append(request)
        async for item in self.inner.run(request):
            yield item
            if len(self.asked) == 1:
                raise RunnerLost("the actor died")


async def test_a_run_whose_runner_is_lost_is_sent_again_as_its_next_attempt(make_app) -> None:
    model = ScriptedModel([ScriptedTurn(calls=[ScriptedCall("list_files", {})]), finish("Done.")])
    app = await make_app(model)
    lost = LostOnce(app.hub._runs._runner)
    app.hub._runs._runner = lost
    chat = Chat(app)
    await app.start()
    await chat.mention("what is here? workflow=chat", settle=False)
    await wait_for(lambda: any(line.startswith("✅ Done.") for line in chat.said()))

    assert [(r.kind, r.attempt) for r in lost.asked] == [
        (RunKind.START, 1),
        (RunKind.GO_ON, 2),  # its input journaled: it goes on from the journal
    ]
    assert len({r.run_id for r in lost.asked}) == 2
    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE
    requests = [r.entry for r in snap.journal if isinstance(r.entry, UserText)]
    assert [t.role for t in requests] == ["request"]  # the mention journaled once
