"""Limits and priorities through the hub (docs/architecture.md, "Limits and priorities").

A person over ``user_runs`` is queued, told so in the thread of the fake Slack (one
message, edited as it moves and when the run starts), and started when their run ends
(``user_runs_over = "refuse"`` still refuses: ``tests/test_settings_layers.py``); a
run that waits less than ``queued_after`` says nothing; the message is posted once the
run has waited ``queued_after`` and edited at most every ``queued_edit_every``; a
higher-priority channel's run starts before an older one of a lower channel, and a
workflow's priority counts; a second command waits for the first under
``commands_at_once``, a second model call under ``model_calls_at_once``; a stop while
queued leaves the queue, its message posted or not; the limits hold across two bots on
one database; a dead holder's slot frees up. The
store's part, every backend: ``tests/test_slots_store.py`` and
``tests/test_slot_pass.py``. Most tests here set ``queued_after`` and
``queued_edit_every`` to 0, to see the message at the first look.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from bot.app import build
from bot.layers import ConversationSettings
from bot.limits import workflow_priority
from bot.settings import Settings
from conversations.events import PlatformRef, PostReply
from conversations.hub._queued import Queueing, wait_name
from conversations.render import QUEUED, queued_id, queued_text, render_event
from conversations.slots import SlotLimits, Slots
from conversations.store import ConversationInfo, Outgoing, Store
from conversations.store.memory import MemoryStore
from conversations.store.slots import Category, Limits, SlotAsk, SlotStore, Standings
from core.models.base import ToolKind, ToolSpec
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.settings import EngineSettings
from core.runner.protocol import RunKind, RunRequest
from core.tools.base import Tool, Toolbox, ToolContext, ToolOutput
from core.tools.control import control_tools
from core.vocabulary.entries import WorkflowChosen
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from core.workflows.loading import load_library
from tests.conftest import wait_for
from tests.fakes.slack_api import TEAM_ID
from tests.harness import Chat
from tests.slack_harness import CHANNEL, Workspace, slack_workspace
from tests.test_settings_layers import bot_posts, layered
from tests.test_slack_story import finish, plan

OTHER = "C0DOCS00002"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """The shared settings, the queued message posted and edited at the first look."""
    settings.queued_after = 0
    settings.queued_edit_every = 0
    return settings


def gated(gate: asyncio.Event) -> ScriptedTurn:
    """A plan the model proposes once ``gate`` is set (its run holds its slot meanwhile)."""
    return plan(gate)


def asked(model: ScriptedModel, *texts: str) -> list[str]:
    """Which of ``texts`` each model call was asked about, in order (each request's words
    are in its messages)."""
    return [next(t for t in texts if t in str(r.messages)) for r in model.requests]


def queued_post(ws: Workspace, channel: str, thread: str) -> dict[str, Any] | None:
    """The bot's queued message in ``thread`` as it is now, if posted."""
    found = [
        m for m in bot_posts(ws, channel, thread) if "Queued" in m["text"] or "queue" in m["text"]
    ]
    return found[0] if found else None


async def mentioned(ws: Workspace, channel: str, text: str) -> str:
    """Mention the bot without waiting for the run to settle (it may wait for a slot)."""
    from tests.fakes.slack_api import BOT_USER_ID

    said = f"<@{BOT_USER_ID}> {text}"
    ts = str(ws.api.add_message(channel, said)["ts"])
    for body in (ws.mention_body(ts, said), ws.message_body(ts, said)):
        body["event"]["channel"] = channel
        await ws.deliver("events_api", body)
    return ts


# --- a person over user_runs is queued -------------------------------------------------------


async def test_a_person_over_user_runs_is_queued_told_so_and_started_when_their_run_ends(
    settings: Settings,
) -> None:
    gate = asyncio.Event()
    first_turn = gated(gate)
    model = ScriptedModel([first_turn, plan()])
    s = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: {"user_runs": 1}}}})
    async with slack_workspace(s, model) as ws:
        first = await mentioned(ws, CHANNEL, "first")
        await asyncio.wait_for(first_turn.started.wait(), 30)
        second = await mentioned(ws, CHANNEL, "second")

        await wait_for(lambda: queued_post(ws, CHANNEL, second) is not None)
        queued = queued_post(ws, CHANNEL, second)
        assert queued is not None
        assert queued["text"] == "⏳ Queued: 1 run ahead of this one."
        assert len(model.requests) == 1  # the second waits: no model call yet
        (slot,) = [s for s in await ws.app.store.slots.slots() if s.state.value == "waiting"]
        assert (slot.user, slot.workspace) == ("slack:U0ALICE001", f"slack:{TEAM_ID}")

        gate.set()  # the first run proposes its plan and waits: its slot is freed
        await wait_for(lambda: any("📋 Plan" in m["text"] for m in bot_posts(ws, CHANNEL, second)))
        await ws.settle()
        started = queued_post(ws, CHANNEL, second)
        assert started is not None and started["ts"] == queued["ts"]  # the same message, edited
        assert started["text"].startswith("▶️ Started after waiting ")
        assert asked(model, "first", "second") == ["first", "second"]
        assert any("📋 Plan" in m["text"] for m in bot_posts(ws, CHANNEL, first))
        assert await ws.app.store.slots.slots() == []  # both runs wait for a person now
        updates = [c for c in ws.calls("chat.update") if c.args.get("ts") == queued["ts"]]
        assert len(updates) == 1


async def test_a_run_that_waits_less_than_queued_after_says_nothing(settings: Settings) -> None:
    settings.queued_after = 3600
    gate = asyncio.Event()
    first_turn = gated(gate)
    model = ScriptedModel([first_turn, plan()])
    s = layered(settings, slack={TEAM_ID: {"channels": {CHANNEL: {"user_runs": 1}}}})
    async with slack_workspace(s, model) as ws:
        await mentioned(ws, CHANNEL, "first")
        await asyncio.wait_for(first_turn.started.wait(), 30)
        second = await mentioned(ws, CHANNEL, "second")

        async def second_waits() -> bool:
            rows = await ws.app.store.slots.slots()
            return [r.state.value for r in rows] == ["held", "waiting"]

        await wait_for(second_waits)
        gate.set()
        await wait_for(lambda: any("📋 Plan" in m["text"] for m in bot_posts(ws, CHANNEL, second)))
        await ws.settle()
        assert asked(model, "first", "second") == ["first", "second"]
        assert queued_post(ws, CHANNEL, second) is None  # neither queued nor started said
        rows = await ws.app.store.outbox.rows()
        assert [r for r in rows if r.purpose == QUEUED] == []


async def has(said: Callable[[], Awaitable[list[str]]], n: int) -> bool:
    """Whether ``said()`` holds ``n`` messages."""
    return len(await said()) >= n


class CountedLooks:
    """A store's slots, counting the looks of a waiting process (``slot_standings``)."""

    def __init__(self, slots: SlotStore) -> None:
        self._slots = slots
        self.looks = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._slots, name)

    async def slot_standings(self, ids: Any, **kwargs: Any) -> Standings:
        self.looks += 1
        return await self._slots.slot_standings(ids, **kwargs)


def clocked(app: Any, slots: SlotStore, clock: list[float]) -> Queueing:
    """A :class:`Queueing` under ``cluster_max_runs = 1`` on ``slots``, its message posted
    after 5 s and edited every 10 s of ``clock[0]``."""
    return Queueing(
        slots=Slots(store=slots, owner="a:1", limits=SlotLimits(cluster_max_runs=1), poll=0.01),
        threads=app.store.threads,
        outbox=app.store.outbox,
        engine=app.engine,
        after=5,
        edit_every=10,
        clock=lambda: clock[0],
    )


async def cluster_held(store: Store) -> Any:
    """The cluster's one slot, held by another process's run (``running``): its asking."""
    running = await store.slots.ask_slot(
        SlotAsk(conversation_id="running", limits=Limits(cluster=1)),
        holder="b:2",
        ttl=3600,
        aging=60,
    )
    assert running.standing is not None and running.standing.held
    return running


async def test_the_queued_message_is_posted_after_queued_after_and_edited_every_queued_edit_every(
    settings: Settings,
) -> None:
    app = await build(settings, model=ScriptedModel([]))
    try:
        store = app.store
        cid = (await opened(store, TEAM_ID, "1.0")).id
        clock = [0.0]
        counted = CountedLooks(store.slots)
        queueing = clocked(app, counted, clock)
        one = Limits(cluster=1)
        running = await cluster_held(store)
        began, end = asyncio.Event(), asyncio.Event()

        async def run() -> None:
            request = RunRequest(conversation_id=cid, run_id="r1", kind=RunKind.GO_ON)
            async with queueing.slot(request):
                began.set()
                await end.wait()

        async def said() -> list[str]:
            rows = [r for r in await store.outbox.rows(cid) if r.purpose == QUEUED]
            return [f"{type(r.action).__name__}: {getattr(r.action, 'text', '')}" for r in rows]

        async def looked(more: int) -> None:
            target = counted.looks + more
            await wait_for(lambda: counted.looks >= target)

        task = asyncio.create_task(run())
        try:
            await looked(3)
            assert await said() == []  # 0 s of 5: nothing yet
            clock[0] = 5.0
            await wait_for(lambda: said())
            assert await said() == ["PostReply: ⏳ Queued: 1 run ahead of this one."]

            urgent = SlotAsk(conversation_id="urgent", limits=one, priority=100)
            passed = await store.slots.ask_slot(urgent, holder="b:2", ttl=3600, aging=60)
            assert passed.standing is not None and not passed.standing.held  # it goes first
            clock[0] = 14.0
            await looked(3)
            assert len(await said()) == 1  # 9 s since the post: the new count waits
            clock[0] = 15.0
            await wait_for(lambda: has(said, 2))
            assert (await said())[1] == "UpdateMessage: ⏳ Queued: 2 runs ahead of this one."

            clock[0] = 20.0
            freed = await store.slots.release_slot(running.standing.slot_id)
            assert [g.conversation_id for g in freed.granted] == ["urgent"]
            freed = await store.slots.release_slot(passed.standing.slot_id)
            assert [g.conversation_id for g in freed.granted] == [cid]
            await asyncio.wait_for(began.wait(), 30)
            assert (await said())[2:] == [
                "UpdateMessage: ▶️ Started after waiting 20s in the queue."
            ]
        finally:
            end.set()
            if not began.is_set():  # a failure above: the run still waits
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert await store.slots.slots() == []
    finally:
        await app.close()


async def test_a_run_asking_again_after_a_restart_edits_the_queued_message_posted_before(
    settings: Settings,
) -> None:
    """A process died while its run waited and had posted the queued message (the row is
    what the store keeps of it); the run asks again in the next life: it edits that
    message as it waits and when it starts, and posts none of its own."""
    app = await build(settings, model=ScriptedModel([]))
    try:
        store = app.store
        cid = (await opened(store, TEAM_ID, "1.0")).id
        conversation = await store.threads.info(cid)
        request = RunRequest(conversation_id=cid, run_id="second-life", kind=RunKind.GO_ON)
        wait = queued_id(wait_name(request, conversation))
        before = PostReply(ref=conversation.binding, text=queued_text(2))
        await store.outbox.enqueue(cid, [Outgoing(before, purpose=QUEUED, request_id=wait)])
        clock = [0.0]
        queueing = clocked(app, store.slots, clock)
        running = await cluster_held(store)
        began, end = asyncio.Event(), asyncio.Event()

        async def run() -> None:
            async with queueing.slot(request):
                began.set()
                await end.wait()

        async def said() -> list[tuple[str, str | None]]:
            rows = [r for r in await store.outbox.rows(cid) if r.purpose == QUEUED]
            return [(f"{type(r.action).__name__}: {r.action.text}", r.request_id) for r in rows]

        async def waits() -> bool:
            return any(s.conversation_id == cid for s in await store.slots.slots())

        task = asyncio.create_task(run())
        try:
            await wait_for(waits)  # its wait began at 0 s
            clock[0] = 5.0
            await wait_for(lambda: has(said, 2))
            assert await said() == [
                ("PostReply: ⏳ Queued: 2 runs ahead of this one.", wait),
                ("UpdateMessage: ⏳ Queued: 1 run ahead of this one.", wait),  # an edit
            ]
            clock[0] = 7.0
            assert running.standing is not None
            await store.slots.release_slot(running.standing.slot_id)
            await asyncio.wait_for(began.wait(), 30)
            assert (await said())[2:] == [
                ("UpdateMessage: ▶️ Started after waiting 7s in the queue.", wait)
            ]
        finally:
            end.set()
            if not began.is_set():
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

        # A wait of the same name that ended (the message says it started) keeps its
        # message: the next run of that name, granted at once, says nothing.
        shown = await said()
        async with queueing.slot(request.model_copy(update={"run_id": "third-life"})):
            pass
        assert await said() == shown

        # Granted at once in its next life (the slot of the dead one dropped): it still
        # says, on the message posted before, that it started.
        await store.outbox.enqueue(
            cid, [Outgoing(before, purpose=QUEUED, request_id=queued_id("message:M2"))]
        )
        mention = ThreadMessage(text="again", author=Person(id="U1", name="U1"), delivery_key="M2")
        again = RunRequest(conversation_id=cid, run_id="r3", kind=RunKind.START, message=mention)
        async with queueing.slot(again):
            pass
        assert (await said())[-2:] == [
            ("PostReply: ⏳ Queued: 2 runs ahead of this one.", queued_id("message:M2")),
            ("UpdateMessage: ▶️ Started after waiting 0s in the queue.", queued_id("message:M2")),
        ]
    finally:
        await app.close()


# --- priorities --------------------------------------------------------------------------


async def test_a_higher_priority_channel_s_run_starts_before_an_older_one(
    settings: Settings,
) -> None:
    gate = asyncio.Event()
    first_turn = gated(gate)
    model = ScriptedModel([first_turn, plan(), plan()])
    s = layered(
        settings,
        cluster_max_runs=1,
        slack={TEAM_ID: {"channels": {OTHER: {"priority": 5}}}},
    )
    async with slack_workspace(s, model) as ws:
        await mentioned(ws, CHANNEL, "running")
        await asyncio.wait_for(first_turn.started.wait(), 30)
        low = await mentioned(ws, CHANNEL, "low, older")
        await wait_for(lambda: queued_post(ws, CHANNEL, low) is not None)
        high = await mentioned(ws, OTHER, "high, newer")
        await wait_for(lambda: queued_post(ws, OTHER, high) is not None)
        low_post, high_post = queued_post(ws, CHANNEL, low), queued_post(ws, OTHER, high)
        assert low_post is not None and high_post is not None
        assert high_post["text"] == "⏳ Queued: 1 run ahead of this one."

        gate.set()
        await wait_for(lambda: len(model.requests) == 3)
        await ws.settle()
        assert asked(model, "running", "high, newer", "low, older") == [
            "running",
            "high, newer",
            "low, older",
        ]


async def test_a_workflow_s_priority_is_added_to_its_channel_s(tmp_path: Path) -> None:
    folder = tmp_path / "workflows"
    folder.mkdir()
    urgent = (Path(__file__).parents[1] / "core/workflows/shipped/chat.toml").read_text()
    urgent = urgent.replace('name = "chat"', 'name = "urgent"\npriority = 7', 1)
    (folder / "urgent.toml").write_text(urgent)
    library = load_library(folder)
    assert library["urgent"].workflow.priority == 7
    settings = Settings(database_url="memory://", slack={TEAM_ID: {"workflow": "urgent"}})
    layers = settings.layers(known_workflows=library.names)
    store = MemoryStore(render=render_event)
    places = ConversationSettings(layers, _nowhere, base=EngineSettings())
    priority = workflow_priority(library, places, store.journal)
    assert priority is not None
    here = await opened(store, TEAM_ID, "1.0")
    there = await opened(store, "T0ELSE0001", "2.0")
    assert await priority(here, "fix it") == 7  # the workspace's default workflow
    assert await priority(there, "fix it") == 0
    assert await priority(there, "fix it workflow=urgent") == 7  # the one it asks for
    # once chosen, the conversation's journaled workflow counts, whatever it asks now
    chosen = WorkflowChosen(
        name="urgent", definition=library["urgent"].model_dump_json(by_alias=True)
    )
    await store.journal.commit(there.id, Change(entries=(chosen,)))
    assert await priority(there, None) == 7
    assert workflow_priority(load_library(None), places, store.journal) is None  # all 0


async def _nowhere(_conversation_id: str) -> PlatformRef | None:
    return None


async def opened(store: Store, workspace: str, thread: str) -> ConversationInfo:
    """A conversation opened in ``workspace``'s channel, thread ``thread``."""
    where = PlatformRef(platform="slack", workspace=workspace, channel=CHANNEL, thread=thread)
    cid = await store.threads.open_conversation(
        delivery_key=f"Ev{thread}",
        binding=where,
        requester=Person(id="U0ALICE001", name="alice"),
        workspace_root=Path("workspaces"),
        position="planning",
    )
    assert cid is not None
    return await store.threads.info(cid)


# --- step categories ----------------------------------------------------------------------


class GatedCommand:
    """A ``run_command`` that runs until the test lets each call end (no sandbox)."""

    spec = ToolSpec(
        name="run_command",
        description="Run a command.",
        input_schema={"type": "object", "properties": {"command": {"type": "string"}}},
        kind=ToolKind.READ_ONLY,  # runs while planning, no plan to approve first
        repeatable=False,
    )

    def __init__(self) -> None:
        self.running: list[str] = []
        self.ran: list[str] = []
        self.started: dict[str, asyncio.Event] = {}
        self.gates: dict[str, asyncio.Event] = {}

    def gate(self, command: str) -> asyncio.Event:
        return self.gates.setdefault(command, asyncio.Event())

    def began(self, command: str) -> asyncio.Event:
        return self.started.setdefault(command, asyncio.Event())

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        command = str(args["command"])
        self.running.append(command)
        self.began(command).set()
        try:
            await self.gate(command).wait()
        finally:
            self.running.remove(command)
        self.ran.append(command)
        return ToolOutput(content="ok", note=f"ran {command}")


def command(name: str) -> ScriptedTurn:
    return ScriptedTurn(calls=[ScriptedCall("run_command", {"command": name})])


async def test_a_second_command_waits_for_the_first_under_commands_at_once(
    settings: Settings,
) -> None:
    settings.commands_at_once = 1
    tool = GatedCommand()
    tools: list[Tool] = [*control_tools(), tool]
    model = ScriptedModel([command("one"), command("two"), finish("done"), finish("done")])
    app = await build(settings, model=model, toolbox=Toolbox(tools))
    try:
        chat = Chat(app)
        await app.start()
        await chat.mention("run one", settle=False)
        await asyncio.wait_for(tool.began("one").wait(), 30)
        await chat.mention("run two", settle=False)
        await wait_for(lambda: len(model.requests) == 2)  # the second run asked its model

        async def second_waits() -> bool:
            rows = await app.store.slots.slots(Category.COMMAND)
            return [r.state.value for r in rows] == ["held", "waiting"]

        await wait_for(second_waits)
        assert not tool.began("two").is_set()  # its command waits for the first's slot
        assert tool.running == ["one"]

        tool.gate("one").set()
        await asyncio.wait_for(tool.began("two").wait(), 30)
        assert tool.ran == ["one"]
        tool.gate("two").set()
        await app.hub.settled()
        assert tool.ran == ["one", "two"]
        assert await app.store.slots.slots() == []
    finally:
        await app.close()


async def test_a_second_model_call_waits_for_the_first_under_model_calls_at_once(
    settings: Settings,
) -> None:
    settings.model_calls_at_once = 1
    first = ScriptedTurn(calls=[ScriptedCall("list_files", {})], gate=asyncio.Event())
    model = ScriptedModel([first, finish("two done"), finish("one done")])
    app = await build(settings, model=model)
    try:
        chat = Chat(app)
        await app.start()
        await chat.mention("run one workflow=chat", settle=False)
        one = (await chat.snapshot()).id
        await asyncio.wait_for(first.started.wait(), 30)  # one's model call is in flight
        await chat.mention("run two workflow=chat", settle=False)
        two = (await chat.snapshot()).id

        async def second_waits() -> bool:
            rows = await app.store.slots.slots(Category.MODEL)
            return [(r.conversation_id, r.state.value) for r in rows] == [
                (one, "held"),
                (two, "waiting"),
            ]

        await wait_for(second_waits)
        assert len(model.requests) == 1  # two's call waits for one's slot, unsent

        assert first.gate is not None
        first.gate.set()  # one's call answers: its slot goes to two's call
        await app.hub.settled()
        assert asked(model, "run one", "run two") == ["run one", "run two", "run one"]
        answers = [line for line in chat.said() if line.startswith("✅")]
        assert sorted(answers) == ["✅ one done", "✅ two done"], chat.said()
        assert await app.store.slots.slots() == []
    finally:
        await app.close()


# --- a stop while queued, across processes, a dead holder ----------------------------------


async def test_a_stop_while_queued_leaves_the_queue_and_stops_the_conversation(
    settings: Settings,
) -> None:
    settings.max_runs = 1
    gate = asyncio.Event()
    first_turn = gated(gate)
    model = ScriptedModel([first_turn, plan()])
    app = await build(settings, model=model)
    try:
        chat = Chat(app)
        await app.start()
        await chat.mention("first", settle=False)
        first = chat.thread
        await asyncio.wait_for(first_turn.started.wait(), 30)
        await chat.mention("second", settle=False)
        await wait_for(lambda: any("Queued: 1 run ahead" in line for line in chat.said()))
        assert len(await app.store.slots.slots()) == 2

        await chat.stop()  # the second's thread
        await wait_for(lambda: any("Stopped by alice" in line for line in chat.said()))
        assert any("Left the queue before it started" in line for line in chat.said())
        assert not any("Nothing is running" in line for line in chat.said())
        (left,) = await app.store.slots.slots()  # the first's, held
        assert left.state.value == "held"
        stopped = await chat.snapshot()  # the request kept as a note, its delivery handled
        assert [e.entry.text for e in stopped.journal if e.entry.kind == "user_text"] == ["second"]
        assert await app.store.inbox.unhandled() == []  # no restart runs it

        gate.set()
        await app.hub.settled()
        assert asked(model, "first", "second") == ["first"]  # the second never ran
        assert await app.store.slots.slots() == []
        chat.thread = first
        assert (await chat.snapshot()).status.lifecycle.value == "waiting"
    finally:
        await app.close()


async def test_a_stop_while_queued_before_its_message_is_posted_stops_it_quietly(
    settings: Settings,
) -> None:
    settings.max_runs = 1
    settings.queued_after = 3600
    gate = asyncio.Event()
    first_turn = gated(gate)
    model = ScriptedModel([first_turn, plan()])
    app = await build(settings, model=model)
    try:
        chat = Chat(app)
        await app.start()
        await chat.mention("first", settle=False)
        await asyncio.wait_for(first_turn.started.wait(), 30)
        await chat.mention("second", settle=False)

        async def second_waits() -> bool:
            rows = await app.store.slots.slots()
            return [r.state.value for r in rows] == ["held", "waiting"]

        await wait_for(second_waits)
        await chat.stop()  # the second's thread
        await wait_for(lambda: any("Stopped by alice" in line for line in chat.said()))
        assert not any("queue" in line.lower() for line in chat.said())  # none posted, none left
        assert not any("Nothing is running" in line for line in chat.said())
        (left,) = await app.store.slots.slots()  # the first's, held
        assert left.state.value == "held"
        stopped = await chat.snapshot()  # the request kept as a note, its delivery handled
        assert [e.entry.text for e in stopped.journal if e.entry.kind == "user_text"] == ["second"]
        assert await app.store.inbox.unhandled() == []

        gate.set()
        await app.hub.settled()
        assert asked(model, "first", "second") == ["first"]  # the second never ran
        assert await app.store.slots.slots() == []
        rows = await app.store.outbox.rows()
        assert [r for r in rows if r.purpose == QUEUED] == []
    finally:
        await app.close()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_the_limits_hold_across_two_bots_on_one_database(
    database: str, sqlite_settings: Settings, request: pytest.FixtureRequest
) -> None:
    shared = sqlite_settings
    shared.cluster_max_runs = 1
    if database == "sqlite":
        shared.wakeup_poll = 0.05  # SQLite carries no wake-ups: the poll finds the grant
    else:  # only the slot wake-up (NOTIFY) tells the second in time: its poll is 10 min
        shared.database_url = request.getfixturevalue("postgres_url")
        shared.wakeup_poll = 600
    gate = asyncio.Event()
    first_turn = gated(gate)
    one_model, two_model = ScriptedModel([first_turn]), ScriptedModel([plan()])
    one = await build(shared.model_copy(update={"instance": "one"}), model=one_model)
    two = await build(shared.model_copy(update={"instance": "two"}), model=two_model)
    try:
        one_chat, two_chat = Chat(one), Chat(two)
        await one.start()
        await two.start()
        await one_chat.mention("on one", settle=False)
        await asyncio.wait_for(first_turn.started.wait(), 30)
        await two_chat.mention("on two", settle=False)
        await wait_for(lambda: any("Queued: 1 run ahead" in line for line in two_chat.said()))
        assert two_model.requests == []
        holders = {(s.holder, s.state.value) for s in await two.store.slots.slots()}
        assert holders == {("one", "held"), ("two", "waiting")}

        gate.set()
        await wait_for(lambda: len(two_model.requests) == 1)
        await one.hub.settled()
        await two.hub.settled()
        assert any("Started after waiting" in line for line in two_chat.said())
        assert await two.store.slots.slots() == []
    finally:
        await one.close()
        await two.close()


async def test_a_slot_held_by_a_holder_that_stopped_renewing_frees_up(settings: Settings) -> None:
    settings.cluster_max_runs = 1
    settings.wakeup_poll = 0.05
    model = ScriptedModel([plan()])
    app = await build(settings, model=model)
    try:
        chat = Chat(app)
        await app.start()
        ghost = SlotAsk(
            conversation_id="elsewhere", category=Category.RUN, limits=Limits(cluster=1)
        )
        passed = await app.store.slots.ask_slot(ghost, holder="gone-host:1", ttl=0.5, aging=None)
        assert passed.standing is not None and passed.standing.held  # then it died

        await chat.mention("mine", settle=False)
        await wait_for(lambda: any("Queued: 1 run ahead" in line for line in chat.said()))
        await wait_for(lambda: len(model.requests) == 1)  # its row lapsed: the run started
        await app.hub.settled()
        assert any("Started after waiting" in line for line in chat.said())
        assert await app.store.slots.slots() == []
    finally:
        await app.close()
