"""What the console remembers, in memory or in an append-only JSON-lines state file.

The console numbers every message (a person's or the bot's) with a short integer id
and knows which thread each one is in; the bot stores those ids. So that they
still mean the same after a restart, :class:`ConsoleState` can keep a journal of
its own: one JSON object a line, appended and ``fsync``-ed as things happen, replayed
at start. The lines (the :data:`StateLine` shapes)::

    {"id": 7, "root": 1, "key": "tb-12", "author": "threadbot"}   a message got id 7
    {"counter": 3}                                                a reaction or command
                                                                  used delivery key r3
    {"key": "tb-13"}                                              the bot's edit or reaction
                                                                  with that key was printed
    {"session": "5f3a9c1e"}                                       the file's session (its
                                                                  first line)

``key`` is the idempotency key of a bot's send (None for a person's message); a key
seen in the file is never printed again, and a post's key gives back its id.

Crash windows. What a person types is recorded first (its id or counter in the
file, then its event in ``<file>.pending``, replaced whole and ``fsync``-ed), then
printed, then handed to the bot, and then taken out of ``<file>.pending`` (deleted
when empty). An event still there at the next start (the process died in between)
is printed and handed again (:attr:`ConsoleState.pending`): one the bot never got is
taken as if typed then, and one it had recorded already it drops, by its delivery
key, as it drops any delivery twice. What people type stays in that file only until
the bot has it. A pending file beside a state file made anew is an old one, and is
dropped (:attr:`ConsoleState.dropped`).

The bot's messages are printed first and recorded second, so a crash can lose a
record but never hide a printed message. If the process dies between the two (a
write and one ``fsync``), the next process does not know that message: it is printed
again when the bot redelivers it (the bot had not stored its id either, since
``send`` had not returned), and the lost id is given again to the next message. A
crash in the middle of a write leaves a torn last line; replay drops it (and cuts it
off the file so later lines stay whole). Any other bad line is an error: the file
was damaged by something else.

One console per file: a :class:`ConsoleState` holds an exclusive ``flock`` on its file
from its start until :meth:`ConsoleState.close` (or the process's end), and a second
one on the same file, in this process or another, is a :class:`StateFileError` at its
start. Two consoles on one file would give the same ids to different messages, and a
reply by id would go to the other's thread. The keys are the bot's outbox ids, so the
file belongs with the bot's database: a new database with an old state file would
have the console drop the new database's first sends as already printed.

The other way round, a new state file beside an old database, numbers messages from
[1] again. So that the new [1] is not taken for the old one (the hub would drop it
as a delivery it already had, without a word), a new file starts with a random
session (:attr:`ConsoleState.session`) that goes into every delivery key and ref;
a file written before sessions existed has none and goes on as it was.
"""

from __future__ import annotations

import fcntl
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any, assert_never

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from adapters.console.errors import StateFileError
from conversations.events import InboundEvent, inbound_adapter

_LINE_CONFIG = ConfigDict(frozen=True, extra="forbid", strict=True)


class MessageLine(BaseModel):
    """Message ``id`` is in the thread of ``root`` (itself for a top-level message).

    ``key`` is the idempotency key of the bot's send that printed it, None for a
    person's message; ``author`` the name printed on it (for people reading the file).
    """

    model_config = _LINE_CONFIG
    id: int
    root: int
    key: str | None
    author: str


class CounterLine(BaseModel):
    """A reaction or command was handed to the hub with delivery key counter ``counter``."""

    model_config = _LINE_CONFIG
    counter: int


class SentLine(BaseModel):
    """The bot's send with idempotency key ``key`` (an edit or a reaction) was printed."""

    model_config = _LINE_CONFIG
    key: str


class SessionLine(BaseModel):
    """The file's session: part of every delivery key and ref of the messages it numbers."""

    model_config = _LINE_CONFIG
    session: str


StateLine = MessageLine | CounterLine | SentLine | SessionLine
_state_line: TypeAdapter[StateLine] = TypeAdapter(StateLine)
_pending_file: TypeAdapter[list[dict[str, Any]]] = TypeAdapter(list[dict[str, Any]])
"""``<file>.pending``: the JSON of each event (:data:`conversations.events.inbound_adapter`)."""


class ConsoleState:
    """The next message id and delivery key counter, every message's root, the keys printed.

    With ``path`` None it lives in memory only. Otherwise the constructor creates the
    parent directories and the file if missing, replays it (dropping a torn last
    line) and every change is appended to it before the method returns. Raises
    :class:`StateFileError` when the file cannot be read, has a bad line before the
    last one, cannot be written to, or another console holds it (until :meth:`close`).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._pending_path = None if path is None else path.with_name(f"{path.name}.pending")
        self.next_id = 1
        """The id the next message gets (one past the highest id recorded)."""
        self.next_counter = 1
        """The number in the next reaction's or command's delivery key (``r<n>``)."""
        self._roots: dict[int, int] = {}
        self._sent: dict[str, str | None] = {}
        self._pending: dict[str, InboundEvent] = {}
        self.session = ""
        """The file's session ("" in memory, or in a file from before sessions)."""
        self.created = False
        """The file did not exist, or was empty, when this state was made."""
        self._held: int | None = None
        self.dropped = 0
        """Events in ``<file>.pending`` that were dropped at start: unreadable, or of
        another session (a state file made anew beside an old pending file)."""
        if path is not None:
            try:
                self._replay(path)
                if self.created:
                    self._add(SessionLine(session=secrets.token_hex(4)))
                self._read_pending()
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        """Let another console use the file (the process's end does the same)."""
        if self._held is not None:
            os.close(self._held)
            self._held = None

    @property
    def roots(self) -> Mapping[int, int]:
        """Every known message id mapped to its thread root's id (a root maps to itself)."""
        return self._roots

    @property
    def pending(self) -> list[InboundEvent]:
        """The events recorded but not :meth:`handed` (``<file>.pending``), oldest first."""
        return list(self._pending.values())

    @property
    def sent(self) -> Mapping[str, str | None]:
        """Every idempotency key printed, mapped to what ``send`` returned for it."""
        return self._sent

    def add_message(
        self,
        message_id: int,
        root: int,
        *,
        author: str,
        key: str | None,
        event: InboundEvent | None = None,
    ) -> None:
        """Record that ``message_id`` (in the thread of ``root``) was printed, or, with
        ``event`` (a person's message), is to be printed and handed to the bot."""
        self._add(MessageLine(id=message_id, root=root, key=key, author=author))
        self._hold_pending(event)

    def add_sent(self, key: str) -> None:
        """Record that the bot's send ``key`` was printed and gave no message id."""
        self._add(SentLine(key=key))

    def use_counter(self, event: InboundEvent | None = None) -> None:
        """Record that delivery key counter :attr:`next_counter` was used (by ``event``,
        to hand to the bot)."""
        self._add(CounterLine(counter=self.next_counter))
        self._hold_pending(event)

    def handed(self, delivery_key: str) -> None:
        """Record that the bot has the event with ``delivery_key`` (no longer pending)."""
        if self._pending.pop(delivery_key, None) is not None:
            self._write_pending()

    def _add(self, line: StateLine) -> None:
        self._apply(line)  # first, so a retry after a failed write is still deduplicated
        if self.path is None:
            return
        try:
            with self.path.open("ab") as file:
                file.write(line.model_dump_json().encode() + b"\n")
                file.flush()
                os.fsync(file.fileno())
        except OSError as exc:
            raise StateFileError(
                f"cannot write the console state file {self.path}: {_said(exc)}"
            ) from exc

    def _apply(self, line: StateLine) -> None:
        match line:
            case MessageLine(id=message_id, root=root, key=key):
                self._roots[message_id] = root
                self.next_id = max(self.next_id, message_id + 1)
                if key is not None:
                    self._sent[key] = str(message_id)
            case CounterLine(counter=counter):
                self.next_counter = max(self.next_counter, counter + 1)
            case SentLine(key=key):
                self._sent.setdefault(key, None)
            case SessionLine(session=session):
                self.session = session
            case _:
                assert_never(line)

    def _hold_pending(self, event: InboundEvent | None) -> None:
        if event is not None:
            self._pending[event.delivery_key] = event
            self._write_pending()

    def _write_pending(self) -> None:
        """Replace ``<file>.pending`` with :attr:`pending` (a write, an ``fsync``, a
        rename), or delete it when nothing is pending."""
        where = self._pending_path
        if where is None:
            return
        try:
            if not self._pending:
                where.unlink(missing_ok=True)
                return
            written = where.with_name(f"{where.name}.new")
            made = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with open(made, "wb") as file:
                events = [inbound_adapter.dump_python(e, mode="json") for e in self.pending]
                file.write(_pending_file.dump_json(events))
                file.flush()
                os.fsync(file.fileno())
            os.replace(written, where)
        except OSError as exc:
            raise StateFileError(f"cannot write {where}: {_said(exc)}") from exc

    def _read_pending(self) -> None:
        """Load ``<file>.pending``: the events of this file's session that read as
        events; the rest are dropped (counted in :attr:`dropped`), and so is the whole
        file beside a state file made anew."""
        where = self._pending_path
        assert where is not None
        try:
            data = where.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StateFileError(f"cannot read {where}: {_said(exc)}") from exc
        try:
            found = _pending_file.validate_json(data)
        except ValidationError:  # not a list of objects: one unreadable entry
            found, self.dropped = [], 1
        for raw in found:
            try:
                event = inbound_adapter.validate_python(raw)
            except ValidationError:
                self.dropped += 1
                continue
            if self.created or event.ref.workspace != self.session:
                self.dropped += 1
                continue
            self._pending[event.delivery_key] = event
        if self.dropped:
            self._write_pending()

    def _replay(self, path: Path) -> None:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            made = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)  # the bot's alone
            self._hold(made, path)
            with open(made, "a+b") as file:  # fails now if it cannot be written
                file.seek(0)
                data = file.read()
                self.created = not data.strip()
                keep = self._replay_lines(path, data)
                if keep < len(data) or (keep and not data[:keep].endswith(b"\n")):
                    file.truncate(keep)  # a torn last line; later appends start a new line
                    if keep and not data[:keep].endswith(b"\n"):
                        file.write(b"\n")
                    file.flush()
                    os.fsync(file.fileno())
        except OSError as exc:
            said = _said(exc)
            raise StateFileError(f"cannot open the console state file {path}: {said}") from exc

    def _hold(self, made: int, path: Path) -> None:
        """Lock the file open as ``made`` for this console (a ``flock`` on a duplicate of
        it, kept until :meth:`close`); closes ``made`` and raises :class:`StateFileError`
        when another console holds it."""
        try:
            held = os.dup(made)
        except OSError:
            os.close(made)
            raise
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(held)
            os.close(made)
            if not isinstance(exc, BlockingIOError):
                raise
            raise StateFileError(
                f"the console state file {path} is in use by another threadbot console: "
                "run one console per state file (stop the other, or set "
                "THREADBOT_CONSOLE_STATE to another file)"
            ) from None
        self._held = held

    def _replay_lines(self, path: Path, data: bytes) -> int:
        """Apply every line of ``data``; return how many leading bytes to keep."""
        chunks = data.split(b"\n")
        start = 0
        for number, chunk in enumerate(chunks, 1):
            if chunk.strip():
                try:
                    line = _state_line.validate_json(chunk)
                except ValidationError as exc:
                    if any(rest.strip() for rest in chunks[number:]):
                        raise StateFileError(
                            f"the console state file {path} has a bad line {number}: "
                            f"{chunk[:80]!r} (fix or remove the file)"
                        ) from exc
                    return start  # torn by a crash mid-write: drop it
                self._apply(line)
            start += len(chunk) + 1
        return len(data)


def _said(error: OSError) -> str:
    """``error`` in words: ``.threadbot: read-only file system`` (no errno, no repr)."""
    what = (error.strerror or type(error).__name__).lower()
    return f"{os.fsdecode(error.filename)}: {what}" if error.filename else what
