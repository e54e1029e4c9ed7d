"""/stop while a command runs, and the same delivery twice."""

from __future__ import annotations

import asyncio
import io
import os
import secrets
from pathlib import Path

from adapters.console import ConsoleAdapter
from conversations.events import (
    Author,
    CommandInvoked,
    MessagePosted,
    PlatformRef,
    ReactionChanged,
)
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.tool_records import ToolState
from tests.conftest import wait_for
from tests.fakes.anthropic_server import check_tool_results
from tests.process_harness import live_with


class PipeInput:
    """A console input the test writes to line by line (a real pipe, not a TTY)."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.reader = os.fdopen(read_fd, "r", encoding="utf-8")
        self._writer = os.fdopen(write_fd, "w", encoding="utf-8")

    def send(self, line: str) -> None:
        self._writer.write(line + "\n")
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def test_stop_while_a_command_runs_kills_it_and_ends_the_conversation_cancelled(
    make_app, tmp_path: Path
) -> None:
    marker = f"600.{secrets.randbelow(10**9):09d}"  # this test's command alone has it
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Run the long job"]})]),
            ScriptedTurn(
                calls=[
                    ScriptedCall("run_command", {"command": f"sleep {marker}"}),
                    ScriptedCall("write_file", {"path": "after.txt", "content": "never"}),
                ]
            ),
            ScriptedTurn(text="This must never be asked for."),
        ]
    )
    app = await make_app(model)
    pipe = PipeInput()
    out = io.StringIO()
    console = ConsoleAdapter(input=pipe.reader, output=out, user="alice", wait_between_lines=False)
    app.add_sender(console)
    await app.start()
    console_run = asyncio.create_task(console.run(app.hub, settled=app.hub.settled))

    pipe.send("run the long job")
    await wait_for(lambda: "📋 Plan (v1)" in out.getvalue())
    pipe.send("+✅ 2")
    await wait_for(lambda: live_with(marker))
    conversation_id = (await app.store.threads.active(platform="console"))[0].id

    async def running_calls() -> list:
        snap = await app.store.journal.load(conversation_id)
        return [r for r in snap.tool_calls.values() if r.name == "run_command" and r.process]

    await wait_for(running_calls)
    running = await running_calls()
    assert running[0].state is ToolState.RUNNING  # the stop is handled while it still runs
    assert running[0].process is not None
    pid = running[0].process.group

    pipe.send("/stop 1")
    await wait_for(lambda: _conversation_status(app, conversation_id, Lifecycle.CANCELLED))
    pipe.close()
    assert await console_run == 0

    assert not _alive(pid)
    await wait_for(lambda: not live_with(marker))  # inside the sandbox too
    snap = await app.store.journal.load(conversation_id)
    states = {r.name: r.state for r in snap.tool_calls.values()}
    assert states["run_command"] is ToolState.INTERRUPTED
    assert states["write_file"] is ToolState.CANCELLED
    assert not (Path(snap.workspace) / "after.txt").exists()
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    assert len(model.requests) == 2
    bot_lines = [line for line in out.getvalue().splitlines() if "threadbot:" in line]
    assert bot_lines[-1].endswith(
        "⏹ Stopped by alice. 1 tool call interrupted while running. 1 tool call was cancelled."
    )
    last_plan_line = max(i for i, line in enumerate(bot_lines) if "Plan (v1)" in line)
    assert bot_lines[last_plan_line + 1 :] == [bot_lines[-1]]


async def test_stop_while_the_model_answers_then_the_next_message_gives_a_valid_request(
    make_app,
) -> None:
    blocked = ScriptedTurn(gate=asyncio.Event(), calls=[ScriptedCall("list_files", {})])
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Look"]})]),
            blocked,
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Fresh start."})]),
        ]
    )
    app = await make_app(model)
    out = io.StringIO()
    app.add_sender(ConsoleAdapter(input=io.StringIO(""), output=out))
    await app.start()
    alice = Author(id="console:alice", name="alice")
    top = PlatformRef(platform="console", channel="console", user=alice.id)
    thread = top.in_thread("1")

    await app.hub.handle(
        MessagePosted(
            delivery_key="m1",
            ref=top.model_copy(update={"message": "1"}),
            author=alice,
            text="look around",
            mentions_bot=True,
        )
    )
    await app.hub.settled()
    plan_message = await _plan_message_id(app)
    await app.hub.handle(
        ReactionChanged(
            delivery_key="r1",
            ref=thread.model_copy(update={"message": plan_message}),
            author=alice,
            emoji="white_check_mark",
        )
    )
    await asyncio.wait_for(blocked.started.wait(), 5)  # the model answers, blocked
    await app.hub.handle(CommandInvoked(delivery_key="c1", ref=thread, author=alice, name="stop"))
    await app.hub.settled()
    assert out.getvalue().rstrip().endswith("⏹ Stopped by alice.")
    conversation_id = (await app.store.threads.find_by_thread(thread)).id
    snap = await app.store.journal.load(conversation_id)
    assert snap.status.lifecycle is Lifecycle.CANCELLED
    assert "list_files" not in {r.name for r in snap.tool_calls.values()}

    await app.hub.handle(
        MessagePosted(
            delivery_key="m2",
            ref=thread.model_copy(update={"message": "9"}),
            author=alice,
            text="try again",
        )
    )
    await app.hub.settled()

    assert "✅ Fresh start." in out.getvalue()
    assert check_tool_results(model.requests[-1].messages) is None
    assert (await app.store.threads.info(conversation_id)).status.lifecycle is Lifecycle.DONE


async def _plan_message_id(app) -> str:
    [message_id] = [r.platform_message_id for r in await app.store.outbox.rows() if r.request_id]
    return message_id


async def _conversation_status(app, conversation_id: str, lifecycle: Lifecycle) -> bool:
    return (await app.store.threads.info(conversation_id)).status.lifecycle is lifecycle


async def test_the_same_delivery_twice_gives_one_conversation_and_one_plan(make_app) -> None:
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Do it"]})]),
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Do it again"]})]),
        ]
    )
    app = await make_app(model)
    out = io.StringIO()
    app.add_sender(ConsoleAdapter(input=io.StringIO(""), output=out))
    await app.start()
    mention = MessagePosted(
        delivery_key="console:1",
        ref=PlatformRef(platform="console", channel="console", message="1", user="console:you"),
        author=Author(id="console:you", name="you"),
        text="do it",
        mentions_bot=True,
    )

    await asyncio.gather(app.hub.handle(mention), app.hub.handle(mention))
    await app.hub.handle(mention)
    await app.hub.settled()

    assert len(await app.store.threads.active(platform="console")) == 1
    assert out.getvalue().count("📋 Plan") == 1
    assert len(model.requests) == 1
