"""A person at the console: a mention, a plan, a reaction, a reply, a stop, mistakes.

The hub is a small recording fake: it takes events like the real one (returns at
once) and answers in a task, so ``settled`` means what the real hub means by it.
"""

from __future__ import annotations

import asyncio
import io

from adapters.console import ConsoleAdapter
from conversations.events import (
    AddReaction,
    Button,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    PlatformRef,
    PostReply,
    ReactionChanged,
    UpdateMessage,
)

BUTTONS = (Button(label="Approve", action="approve:1"), Button(label="Reject", action="reject:1"))


class FakeHub:
    """Records events; answers a mention with a plan and a reply with a note, in a task."""

    def __init__(self, adapter: ConsoleAdapter) -> None:
        self.adapter = adapter
        self.events: list[InboundEvent] = []
        self.ids: list[str | None] = []
        self.settled_calls = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def handle(self, event: InboundEvent) -> None:
        self.events.append(event)
        if isinstance(event, MessagePosted):
            self._tasks.append(asyncio.create_task(self._answer(event)))

    async def _answer(self, event: MessagePosted) -> None:
        await asyncio.sleep(0)  # the answer comes after handle() returned
        thread = event.ref.thread or event.ref.message
        assert thread is not None
        ref = event.ref.in_thread(thread)
        if event.mentions_bot:
            plan = PostReply(
                ref=ref,
                text="📋 Plan (v1)\n1. Run the tests",
                buttons=BUTTONS,
                reactions=("white_check_mark", "x"),
            )
            key = f"plan:{event.delivery_key}"
            self.ids.append(await self.adapter.send(plan, idempotency_key=key))
            self.ids.append(await self.adapter.send(plan, idempotency_key=key))  # redelivery
        else:
            note = PostReply(ref=ref, text=f"noted, {event.author.name}")
            self.ids.append(await self.adapter.send(note, idempotency_key=f"note:{event.text}"))

    async def settled(self) -> None:
        self.settled_calls += 1
        await asyncio.gather(*self._tasks)


class TtyInput(io.StringIO):
    def isatty(self) -> bool:
        return True


async def run_console(
    text: str, *, user: str = "you", wait_between_lines: bool | None = None
) -> tuple[ConsoleAdapter, FakeHub, list[str]]:
    output = io.StringIO()
    adapter = ConsoleAdapter(
        input=io.StringIO(text), output=output, user=user, wait_between_lines=wait_between_lines
    )
    hub = FakeHub(adapter)
    assert await adapter.run(hub, settled=hub.settled) == 0
    return adapter, hub, output.getvalue().splitlines()


async def test_a_piped_session_reads_like_the_thread() -> None:
    _, hub, lines = await run_console(
        "the login test is flaky\n+✅ 2\n/as bob\n>2 use one per test\n+✅ 9\n/frob\n"
    )
    assert lines == [
        "[1] you: the login test is flaky",
        "  [2] ↳1 threadbot: 📋 Plan (v1)",
        "      1. Run the tests",
        "      [Approve] [Reject] (reactions: ✅ ❌)",
        "  [2] +✅ you",
        "* you are now bob",
        "  [3] ↳1 bob: use one per test",
        "  [4] ↳1 threadbot: noted, bob",
        "! there is no message [9]",
        "! unknown command /frob (try /help; start the line with \\ to send it as text)",
    ]
    assert hub.ids == ["2", "2", "4"]
    assert [e.kind for e in hub.events] == ["message_posted", "reaction_changed", "message_posted"]


async def test_a_reaction_to_the_bots_plan_names_the_thread_root() -> None:
    _, hub, _ = await run_console("fix it\n+white_check_mark 2\n-:x: 2\n")
    mention, approve, unreact = hub.events
    assert isinstance(mention, MessagePosted)
    assert mention.delivery_key == "console:1" and mention.mentions_bot
    assert approve == ReactionChanged(
        delivery_key="console:r1",
        ref=PlatformRef(
            platform="console", channel="console", thread="1", message="2", user="console:you"
        ),
        author=mention.author,
        emoji="white_check_mark",
        added=True,
    )
    assert isinstance(unreact, ReactionChanged)
    assert (unreact.delivery_key, unreact.emoji, unreact.added) == ("console:r2", "x", False)


async def test_as_changes_the_author_and_decide_names_the_call() -> None:
    _, hub, lines = await run_console("go\n/as alice\n+✅ 2.2\n/stop 2\n", user="sam")
    mention, decide, stop = hub.events
    assert mention.author.id == "console:sam" and mention.author.name == "sam"
    assert isinstance(decide, CommandInvoked)
    assert (decide.name, decide.args, decide.ref.message, decide.ref.thread) == (
        "decide",
        "2.2 white_check_mark",
        "2",
        "1",
    )
    assert decide.author.id == "console:alice"
    assert isinstance(stop, CommandInvoked)
    assert (stop.name, stop.args, stop.ref.thread) == ("stop", "1", "1")
    assert lines[-2:] == ["  [2.2] +✅ alice", "  ↳1 alice: /stop 1"]


async def test_errors_send_nothing_and_lose_nothing() -> None:
    _, hub, lines = await run_console(">1 hello\n+✅ 1\n/stop 1\n-✅ 1.1\nhi\n")
    assert lines[:4] == [
        "! there is no message [1]",
        "! there is no message [1]",
        "! there is no message [1]",
        "! there is no message [1]",
    ]
    assert lines[4] == "[1] you: hi"  # ids are not used up by errors
    assert [e.delivery_key for e in hub.events] == ["console:1"]


async def test_settled_after_each_piped_line_and_at_the_end() -> None:
    _, hub, _ = await run_console("one\n\n/help\ntwo\n")
    assert hub.settled_calls == 3  # after "one", after "two", at end of input


async def test_quit_ends_input_like_eof() -> None:
    _, hub, lines = await run_console("one\n/quit\ntwo\n")
    assert [e.delivery_key for e in hub.events] == ["console:1"]
    assert hub.settled_calls == 2
    assert "two" not in "\n".join(lines)


async def test_bot_messages_updates_and_reactions_are_printed_and_deduped() -> None:
    output = io.StringIO()
    adapter = ConsoleAdapter(input=io.StringIO(""), output=output, bot_name="tb")
    top = PlatformRef(platform="console", channel="console")
    assert await adapter.send(PostReply(ref=top, text="hello"), idempotency_key="a") == "1"
    reply = PostReply(ref=top.in_thread("1"), text="step 1 of 3", buttons=BUTTONS[:1])
    assert await adapter.send(reply, idempotency_key="b") == "2"
    edit = UpdateMessage(ref=top.model_copy(update={"message": "2"}), text="step 2\nof 3")
    assert await adapter.send(edit, idempotency_key="c") is None
    assert await adapter.send(edit, idempotency_key="c") is None
    react = AddReaction(ref=top.model_copy(update={"thread": "1", "message": "2"}), emoji="x")
    assert await adapter.send(react, idempotency_key="d") is None
    on_root = AddReaction(ref=top.model_copy(update={"message": "1"}), emoji="repeat")
    assert await adapter.send(on_root, idempotency_key="e") is None
    assert await adapter.send(reply, idempotency_key="b") == "2"
    assert output.getvalue().splitlines() == [
        "[1] tb: hello",
        "  [2] ↳1 tb: step 1 of 3",
        "      [Approve]",
        "  [2] ↳1 tb (edited): step 2",
        "      of 3",
        "  [2] +❌ tb",
        "[1] +🔁 tb",
    ]
    hub = FakeHub(adapter)
    assert await adapter.run(hub) == 0  # no settled given: fine


async def test_a_reply_to_a_top_level_bot_message_starts_at_its_root() -> None:
    output = io.StringIO()
    adapter = ConsoleAdapter(input=io.StringIO(">1 sure\n"), output=output)
    top = PlatformRef(platform="console", channel="console")
    await adapter.send(PostReply(ref=top, text="shall I?"), idempotency_key="k")
    hub = FakeHub(adapter)
    await adapter.run(hub, settled=hub.settled)
    (reply,) = hub.events
    assert isinstance(reply, MessagePosted)
    assert (reply.ref.thread, reply.ref.message, reply.mentions_bot) == ("1", "2", False)


async def test_stop_is_handled_while_a_run_works() -> None:
    release = asyncio.Event()
    seen: list[str] = []

    class BusyHub:
        task: asyncio.Task[bool] | None = None

        async def handle(self, event: InboundEvent) -> None:
            if isinstance(event, MessagePosted):
                self.task = asyncio.create_task(release.wait())
            elif isinstance(event, CommandInvoked):
                assert self.task is not None
                seen.append(f"stop while running={not self.task.done()}")
                release.set()

        async def settled(self) -> None:
            assert self.task is not None
            await self.task

    adapter = ConsoleAdapter(input=TtyInput("work\n/stop 1\n"), output=io.StringIO())
    hub = BusyHub()
    assert await asyncio.wait_for(adapter.run(hub, settled=hub.settled), 5) == 0
    assert seen == ["stop while running=True"]


async def test_a_terminal_greets_and_does_not_wait_between_lines() -> None:
    output = io.StringIO()
    adapter = ConsoleAdapter(input=TtyInput("hi\nthere\n"), output=output)
    hub = FakeHub(adapter)
    await adapter.run(hub, settled=hub.settled)
    assert hub.settled_calls == 1
    lines = output.getvalue().splitlines()
    assert lines[0].startswith("threadbot console:")
    assert "\x1b" not in output.getvalue()


async def test_waiting_can_be_forced_off_for_piped_input() -> None:
    _, hub, _ = await run_console("one\ntwo\n", wait_between_lines=False)
    assert hub.settled_calls == 1
