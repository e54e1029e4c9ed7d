"""The console runner: lines from a terminal or a pipe in, the thread printed out.

:class:`ConsoleAdapter` reads input lines, hands what they mean to the hub (an
:class:`conversations.adapter.InboundSink`) and implements
:class:`conversations.adapter.Sender` by printing. It keeps only what a terminal
needs (a :class:`adapters.console.state.ConsoleState`): the message ids, which
thread each message is in, and the idempotency keys it has already printed, in
memory or in a state file of its own so that they survive a restart. It never
touches a model or the bot's store.
"""

from __future__ import annotations

import asyncio
import queue
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO, assert_never

from adapters.console import translate
from adapters.console.errors import StateFileError
from adapters.console.state import ConsoleState
from adapters.console.texts import TEXTS
from conversations.adapter import InboundSink
from conversations.errors import DeliveryError
from conversations.events import (
    AddReaction,
    ButtonPressed,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    OutboundAction,
    PostReply,
    ReactionChanged,
    SetSessionStatus,
    StartThread,
    UpdateMessage,
)

Settled = Callable[[], Awaitable[None]]


class ConsoleAdapter:
    """A terminal chat with one channel and threads; see :mod:`adapters.console.translate`.

    ``input``/``output`` default to stdin/stdout. ``user`` is the first person
    typing (``/as NAME`` changes it), ``bot_name`` the name printed on the bot's
    messages. ``wait_between_lines``: after each line that sent something, wait
    for ``settled()`` before reading the next; None means "when input is not a
    TTY", so a piped session prints each answer under the line that caused it,
    while a person at a terminal can type ``/stop`` while a run works.

    ``state_file``: keep the ids, threads, delivery key counter and printed
    idempotency keys in this append-only JSON-lines file (see
    :mod:`adapters.console.state`), so that a new process continues the ids, knows
    the threads of an earlier one and prints nothing for a send it already printed.
    Raises :class:`adapters.console.errors.StateFileError` when it cannot be read.
    None keeps them in memory, for this process only. ``session`` prefixes every
    delivery key (``console:<session>:7``) and is the ``workspace`` of every ref;
    with a state file, the file's own session is used (:mod:`adapters.console.state`).
    ``stop_command`` is the configured name of ``/stop``; ``banner`` is printed once when
    the console starts (by default, a greeting at a terminal and nothing on a pipe).
    """

    platform: str = translate.PLATFORM
    texts = TEXTS
    """What the hub says in the console (``bot`` hands it to the hub)."""

    def __init__(
        self,
        *,
        input: TextIO | None = None,
        output: TextIO | None = None,
        user: str = "you",
        bot_name: str = "threadbot",
        wait_between_lines: bool | None = None,
        session: str = "",
        stop_command: str = "stop",
        banner: str | None = None,
        state_file: Path | None = None,
    ) -> None:
        self._input = input if input is not None else sys.stdin
        self._output = output if output is not None else sys.stdout
        self._author = translate.author_for(user)
        self._bot_name = bot_name
        self._wait = wait_between_lines
        self._stop_command = stop_command
        self.banner = banner
        """Printed once when the console starts (None: the default greeting)."""
        self._state = ConsoleState(state_file)
        self._session = session or self._state.session

    @property
    def session(self) -> str:
        """The ``workspace`` of every ref here (and part of every delivery key)."""
        return self._session

    def close(self) -> None:
        """Let go of the state file: another console may use it now (the process's end
        does the same; :meth:`adapters.console.state.ConsoleState.close`)."""
        self._state.close()

    @property
    def state_created(self) -> bool:
        """The state file was made by this adapter (it did not exist, or was empty)."""
        return self._state.created

    # --- Sender ------------------------------------------------------------------

    async def send(
        self, action: OutboundAction, *, idempotency_key: str, maybe_sent: bool = False
    ) -> str | None:
        """Print ``action``; return the new message id (as str) for a :class:`PostReply`.

        ``maybe_sent`` needs no lookup here: every printed key is in the state file.

        A send with an ``idempotency_key`` already printed (in this process, or in an
        earlier one with the same state file) prints nothing and returns what the
        first returned. ``PostReply`` in ``ref.thread`` (top level when None) takes
        the next id; ``StartThread`` posts at the top level and its id names the
        thread; ``UpdateMessage`` and ``AddReaction`` return None; a ``SetSessionStatus``
        does nothing (the console has no sessions). Never raises
        for an unknown message id: it prints what it was given. Raises
        :class:`DeliveryError` when the state file cannot be written to; the action
        was printed then, and a retry with the same key returns without printing.
        """
        state = self._state
        if idempotency_key in state.sent:
            return state.sent[idempotency_key]
        try:
            match action:
                case PostReply():
                    return self._post(action, idempotency_key)
                case StartThread():
                    return self._post(action.post(), idempotency_key)
                case UpdateMessage():
                    self._update(action)
                case AddReaction():
                    self._react(action)
                case SetSessionStatus():  # the console has no sessions
                    return None
                case _:
                    assert_never(action)
            state.add_sent(idempotency_key)
            return None
        except StateFileError as exc:
            raise DeliveryError(f"printed, but not recorded: {exc}") from exc

    def _post(self, action: PostReply, key: str) -> str:
        message_id = self._state.next_id
        thread = action.ref.thread
        root = int(thread) if thread is not None and thread.isdigit() else message_id
        lines = translate.render_message(
            message_id,
            thread,
            self._bot_name,
            action.text,
            buttons=action.buttons,
            reactions=action.reactions,
            only_to=translate.person_of(action.ephemeral_to),
        )
        self._print(*lines)
        self._state.add_message(message_id, root, author=self._bot_name, key=key)
        return str(message_id)

    def _update(self, action: UpdateMessage) -> None:
        target = action.ref.message or "?"
        thread = action.ref.thread
        roots = self._state.roots
        if target.isdigit() and int(target) in roots:
            root = roots[int(target)]
            thread = None if root == int(target) else str(root)
        lines = translate.render_message(
            target, thread, self._bot_name, action.text, edited=True, buttons=action.buttons
        )
        self._print(*lines)

    def _react(self, action: AddReaction) -> None:
        target = action.ref.message or "?"
        in_thread = translate.in_thread(target, self._state.roots)
        self._print(
            translate.render_reaction(target, in_thread, True, action.emoji, self._bot_name)
        )

    # --- input -------------------------------------------------------------------

    async def run(
        self,
        hub: InboundSink,
        *,
        settled: Settled | None = None,
        working: Callable[[], int] | None = None,
    ) -> int:
        """Read lines until ``/quit`` or end of input, handing events to ``hub``.

        Prints the person's messages with their ids, ``! ...`` for a line that
        cannot be sent (nothing is sent then). At the end awaits ``settled()`` (the
        hub's "every run finished or waits for a person, every message delivered")
        and returns 0, the exit status; when ``working()`` (conversations with a
        run going) is not 0 after ``/quit`` (or at the end of a terminal's input),
        it says that it waits and how to leave at once. Errors raised by
        ``hub.handle`` propagate, and so does :class:`StateFileError` when the
        state file cannot be written to (the line was neither printed nor handed to
        the hub, or it was handed and goes again at the next start, which the hub drops).

        First what an earlier console recorded but never handed to the hub (it ended
        in between: :attr:`adapters.console.state.ConsoleState.pending`) is printed
        again and handed to ``hub``.
        """
        interactive = self._isatty(self._input)
        wait = (not interactive) if self._wait is None else self._wait
        reader = _LineReader(self._input)
        if self.banner:
            self._print(self.banner)
        elif interactive:
            self._print(f"{self._bot_name} console: type a message to start; /help for commands")
        await self._hand_pending(hub)
        quitting = False
        while True:
            line = await reader.readline()
            if not line:
                break
            parsed = translate.parse_line(line, self._context())
            if isinstance(parsed, translate.Quit):
                quitting = True
                break
            sent = await self._apply(parsed, hub)
            if sent and wait and settled is not None:
                await settled()
        if settled is not None:
            if (quitting or interactive) and working is not None and (busy := working()):
                self._print(_waiting(busy))
            await settled()
        return 0

    async def _apply(self, parsed: translate.Parsed, hub: InboundSink) -> bool:
        """Do what one parsed line asks; True when an event went to the hub."""
        match parsed:
            case MessagePosted() | ReactionChanged() | CommandInvoked():
                pass
            case translate.SwitchUser(name=name):
                self._author = translate.author_for(name)
                self._print(f"* you are now {name}")
                return False
            case translate.ShowHelp():
                self._print(*translate.help_lines(self._stop_command))
                return False
            case translate.Invalid(message=message):
                self._print(f"! {message}")
                return False
            case translate.Blank() | translate.Quit():
                return False
            case _:
                assert_never(parsed)
        self._record(parsed)
        await self._hand(parsed, hub)
        return True

    async def _hand_pending(self, hub: InboundSink) -> None:
        """Print and hand what an earlier console recorded and never handed; raises
        :class:`StateFileError` (saying how to drop it) when the hub refuses one."""
        state = self._state
        if state.dropped:
            self._print(
                f"* {state.dropped} line(s) typed before the last console ended could not "
                "be read, or were typed beside another state file: dropped"
            )
        if pending := state.pending:
            self._print("* handed to the bot now: typed before the last console ended")
        for event in pending:
            try:
                await self._hand(event, hub)
            except Exception as exc:
                raise StateFileError(
                    f"could not hand a line typed before the last console ended to the bot "
                    f"({exc}); start again to try once more, or delete {state.path}.pending "
                    "to drop it"
                ) from exc

    async def _hand(self, event: InboundEvent, hub: InboundSink) -> None:
        """Print a recorded ``event``, hand it to ``hub`` and record that it was handed."""
        self._print(*translate.echo(event, self._state.roots))
        await hub.handle(event)
        self._state.handed(event.delivery_key)

    def _record(self, event: InboundEvent) -> None:
        """Record ``event`` to be handed, with the id (a message) or the delivery key
        counter (the rest) it used."""
        match event:
            case MessagePosted(ref=ref, author=author):
                message_id = int(ref.message or 0)
                root = message_id if ref.thread is None else int(ref.thread)
                self._state.add_message(message_id, root, author=author.name, key=None, event=event)
            case ReactionChanged() | CommandInvoked() | ButtonPressed():
                self._state.use_counter(event)
            case _:
                assert_never(event)

    def _context(self) -> translate.Context:
        return translate.Context(
            author=self._author,
            next_id=self._state.next_id,
            next_counter=self._state.next_counter,
            roots=self._state.roots,
            session=self._session,
            stop_command=self._stop_command,
        )

    def _print(self, *lines: str) -> None:
        for line in lines:
            self._output.write(line + "\n")
        self._output.flush()

    @staticmethod
    def _isatty(stream: TextIO) -> bool:
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False


class _LineReader:
    """Reads lines in one daemon thread, one line per request, without blocking the loop.

    A daemon thread (rather than the loop's default executor) so that a read still
    blocked on a terminal never holds up the process at exit.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._requests: queue.SimpleQueue[asyncio.Future[str]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ended = False

    async def readline(self) -> str:
        """The next line with its newline, or ``""`` at end of input (and after it)."""
        if self._ended:
            return ""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._requests.put(future)
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="console-input", daemon=True)
            self._thread.start()
        return await future

    def _serve(self) -> None:
        while True:
            future = self._requests.get()
            try:
                line = self._stream.readline()
            except (OSError, ValueError):
                line = ""  # closed or broken input reads as end of input
            if not line:
                self._ended = True
            try:
                future.get_loop().call_soon_threadsafe(_resolve, future, line)
            except RuntimeError:
                return  # the loop is closed: nobody is waiting any more
            if not line:
                return


def _resolve(future: asyncio.Future[str], line: str) -> None:
    if not future.done():
        future.set_result(line)


def _waiting(busy: int) -> str:
    conversations = "1 conversation is" if busy == 1 else f"{busy} conversations are"
    return (
        f"* {conversations} still working: waiting until each finishes or waits for "
        "a person. Press Ctrl-C to leave now (runs stop after their current step and "
        "go on at the next start)."
    )
