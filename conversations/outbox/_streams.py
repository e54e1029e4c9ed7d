"""Streamed answers: the answer's preview pushed into its thread while the model writes it.

The engine tells :class:`AnswerStreams` (its :class:`core.run.preview.AnswerPreview`)
the answer so far; a task of the conversation pushes what is new to the platform's
:class:`conversations.adapter.AnswerStreamer` (Slack's ``chat.startStream`` /
``appendStream``), and the answer's outbox row finalises it (docs/architecture.md
"Streamed answers"):

- A stream starts only when the deliverer may send the conversation's next row now:
  no worker of it busy, this process holding its delivery claim, and no row of it
  pending (so the plan, the notes and the session's status are in the thread first);
  a worker that ends tells it to look again (:meth:`AnswerStreams.nudge`).
- The preview opens with the answer's mark (``✅ ``) and goes through a
  :class:`core.secrets.RedactionStream`: a tail that may be the start of a secret is
  held back until the next piece shows it is not, so a token split across two
  pieces is never shown, even in part.
- The answer's row, when its turn comes (:meth:`AnswerStreams.finalising`), is sent
  with the preview (:class:`conversations.events.StreamedPreview`): the sender stops
  the stream with the rest of the answer, or, where the stream ended (the platform
  ended it, a call failed), edits the whole answer into the streamed message. So the
  thread holds the answer once, whole, in one message. Where no stream was started
  (not allowed, no streamer on the platform, rows pending all along) the row is
  posted as before.
- A preview that grows past the streamer's ``stream_limit`` is stopped with
  :data:`TOO_LONG` and the answer's row is posted as before (parts, or a file).
- Another milestone (a stop, a failure, a reply's acknowledgement) closes an open
  stream as it is first (:meth:`AnswerStreams.close`).

Nothing here is stored. A process that dies leaves its stream open; where a run goes
on after another process left it (a restart, a takeover: :meth:`AnswerStreams.resumed`,
told by the hub), the thread is looked at once (``conversations.replies`` on Slack) for
such a stream (:meth:`AnswerStreamer.left_open`: the bot's newest message there, a
stream never stopped), before a stream of its own starts or an answer that streamed
nothing here goes out. One found is taken over: nothing more is streamed into it, and
the answer's row stops it and edits the whole answer in. So a restart in the middle of
a stream leaves one whole answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Container, Mapping
from dataclasses import dataclass, field

from conversations.adapter import AnswerStreamer, Sender
from conversations.errors import DeliveryError, RateLimited, StreamEnded
from conversations.events import TOO_LONG, PlatformRef, StreamedPreview
from conversations.outbox._claims import ClaimedDelivery
from conversations.outbox._clock import Clock, MonotonicClock
from conversations.outbox._known import KnownRows
from conversations.store import ConversationInfo
from core.secrets import NO_SECRETS, RedactionStream, Redactor

log = logging.getLogger("conversations.outbox")

OPENING = "✅ "
"""How a streamed answer opens: its mark (:func:`conversations.render.render_event`)."""
EVERY = 0.6
"""Seconds at least between two calls of one stream: at most 100 a minute, Slack's Tier 4
for ``chat.appendStream`` (https://docs.slack.dev/reference/methods/chat.appendStream)."""

ConversationLookup = Callable[[str], Awaitable[ConversationInfo | None]]
"""A conversation's binding and requester, by its id (the store's ``threads.find``)."""


async def _nowhere(_conversation_id: str) -> ConversationInfo | None:
    return None  # streams nothing (a deliverer built without the engine's streams)


@dataclass
class _Stream:
    """One conversation's preview: what the run told, what went out."""

    redaction: RedactionStream
    text: str = ""
    fed: int = 0
    """Characters of ``text`` fed to the redaction stream."""
    out: str = ""
    """Released by the redaction stream, not streamed yet."""
    thread: PlatformRef | None = None
    recipient: str = ""
    streamer: AnswerStreamer | None = None
    message: str | None = None
    shown: int = 0
    open: bool = False
    """The stream takes text."""
    pushing: bool = True
    """The preview may still be streamed (not finalised, not too long, not refused)."""
    too_long: bool = False
    looked_up: bool = False
    """The conversation's thread and streamer were looked for."""
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    task: asyncio.Task[None] | None = None


class AnswerStreams:
    """Streams each conversation's answer while it is written (see the module docstring).

    ``conversation`` finds a conversation's thread and requester; ``redactor`` the bot's
    secrets; ``every``: seconds at least between two calls of one stream (what came
    meanwhile goes in the next, whole). :meth:`attach` ties it to the deliverer whose rows
    finalise its streams."""

    def __init__(
        self,
        *,
        conversation: ConversationLookup = _nowhere,
        redactor: Redactor = NO_SECRETS,
        every: float = EVERY,
    ) -> None:
        self._conversation = conversation
        self._redactor = redactor
        self._streams: dict[str, _Stream] = {}
        self._resumed: set[str] = set()
        """Conversations resumed here whose thread is yet to be looked at (:meth:`resumed`)."""
        self._workers: Container[str] = ()
        self._known: KnownRows | None = None
        self._may_send: Callable[[str], Awaitable[bool]] | None = None
        self._senders: Mapping[str, Sender] = {}
        self._clock: Clock = MonotonicClock()
        self._every = every

    def attach(
        self,
        workers: Container[str],
        known: KnownRows,
        claims: ClaimedDelivery,
        senders: Mapping[str, Sender],
        clock: Clock,
    ) -> None:
        """Stream through a deliverer: its busy ``workers`` (conversation ids), the rows it
        ``known``s pending, its ``claims`` (streamed where the claim is held here), its
        ``senders`` by platform (those that are :class:`AnswerStreamer` stream) and its
        ``clock`` (the waits between calls)."""
        self._workers, self._known, self._may_send = workers, known, claims.may_send
        self._senders, self._clock = senders, clock

    async def _quiet(self, conversation_id: str) -> bool:
        """Whether the conversation's next row may go now: no worker of it busy, nothing
        of it pending, its delivery claim held here (taken, when it may be)."""
        assert self._known is not None and self._may_send is not None
        if conversation_id in self._workers or self._known.pending(conversation_id):
            return False
        if not await self._may_send(conversation_id):
            return False
        return not self._known.pending(conversation_id)  # a claim taken anew reads again

    def _streamer(self, platform: str) -> AnswerStreamer | None:
        sender = self._senders.get(platform)
        return sender if isinstance(sender, AnswerStreamer) else None

    # --- the engine's preview (core.run.preview.AnswerPreview) ---------------------

    def grew(self, conversation_id: str, text: str) -> None:
        """The answer so far; pushed by the conversation's task when it may go."""
        stream = self._streams.get(conversation_id)
        if stream is None:
            stream = _Stream(redaction=self._redactor.stream())
            self._streams[conversation_id] = stream
        if not stream.pushing:
            return
        if not text.startswith(stream.text[: stream.fed]):
            # Another response (the one before broke off): what was shown stays, and
            # the answer's row edits the whole answer in.
            stream.pushing = stream.message is None
            stream.redaction, stream.fed, stream.out = self._redactor.stream(), 0, ""
        stream.text = text
        stream.changed.set()
        if stream.pushing and (stream.task is None or stream.task.done()):
            stream.task = asyncio.create_task(
                self._push(conversation_id, stream), name=f"stream {conversation_id}"
            )

    def ended(self, conversation_id: str, answered: bool) -> None:
        """The turn ended: the answer's row (or another milestone) finalises the stream."""
        return None

    # --- the deliverer's ---------------------------------------------------------

    def resumed(self, conversation_id: str) -> None:
        """The conversation's run goes on here after another process left it: look for a
        stream of its answer left open before streaming or finalising it."""
        self._resumed.add(conversation_id)

    def nudge(self, conversation_id: str) -> None:
        """Look again whether the conversation may be streamed (a worker of it ended)."""
        stream = self._streams.get(conversation_id)
        if stream is not None:
            stream.changed.set()

    async def finalising(self, conversation_id: str) -> StreamedPreview | None:
        """The preview the answer's row finalises (None: post it as before); nothing is
        streamed after this. Waits for a push under way; an answer that streamed nothing
        here looks for a stream left open first."""
        stream = self._streams.get(conversation_id)
        if stream is None:
            if self._known is None or conversation_id not in self._resumed:
                return None
            stream = _Stream(redaction=self._redactor.stream(), pushing=False)
            self._streams[conversation_id] = stream
        async with stream.lock:
            self._halt(stream)
            if stream.message is None and not stream.too_long:
                await self._taken_over(conversation_id, stream)
            if stream.message is None or stream.too_long:
                return None
            return StreamedPreview(message=stream.message, open=stream.open)

    def settled(self, conversation_id: str) -> None:
        """The answer's row went out: forget the stream (a later run streams anew)."""
        stream = self._streams.pop(conversation_id, None)
        self._resumed.discard(conversation_id)
        if stream is not None:
            self._halt(stream)

    async def close(self, conversation_id: str) -> None:
        """Close the conversation's stream as it is (another milestone comes first), or,
        in a conversation resumed here, a stream a process left open in its thread."""
        stream = self._streams.pop(conversation_id, None)
        if stream is None and conversation_id in self._resumed and self._known is not None:
            stream = _Stream(redaction=self._redactor.stream(), pushing=False)
            await self._taken_over(conversation_id, stream)
        self._resumed.discard(conversation_id)
        if stream is None:
            return
        async with stream.lock:
            self._halt(stream)
            if stream.open and stream.streamer is not None and stream.thread is not None:
                assert stream.message is not None
                with contextlib.suppress(DeliveryError):
                    await stream.streamer.stop_stream(stream.thread, stream.message, "")
                stream.open = False

    def cancel(self) -> None:
        """Stop pushing anything (the deliverer stops)."""
        for stream in self._streams.values():
            if stream.task is not None:
                stream.task.cancel()

    # --- pushing ----------------------------------------------------------------

    @staticmethod
    def _halt(stream: _Stream) -> None:
        stream.pushing = False
        stream.changed.set()

    async def _push(self, conversation_id: str, stream: _Stream) -> None:
        """Push what is new whenever the conversation may be streamed, until halted."""
        while stream.pushing:
            stream.changed.clear()
            new = stream.fed < len(stream.text) or bool(stream.out)
            if new and self._known is not None and await self._quiet(conversation_id):
                wait = 0.0
                async with stream.lock:
                    if stream.pushing:
                        wait = await self._step(conversation_id, stream)
                if wait > 0 and stream.pushing:
                    await self._clock.sleep(wait)  # what comes meanwhile goes in one call
                continue
            await stream.changed.wait()

    async def _bound(self, conversation_id: str, stream: _Stream) -> bool:
        """Whether the conversation has a thread and a streamer (found once)."""
        if stream.streamer is None and not stream.looked_up:
            stream.looked_up = True
            info = await self._conversation(conversation_id)
            streamer = self._streamer(info.binding.platform) if info is not None else None
            if info is not None and streamer is not None and info.binding.thread is not None:
                stream.streamer, stream.thread = streamer, info.binding
                stream.recipient = info.requester.id
        return stream.streamer is not None

    async def _taken_over(self, conversation_id: str, stream: _Stream) -> bool:
        """Take over a stream a dead process left open in the thread (the module
        docstring): the answer's row stops it and edits the whole answer in."""
        if conversation_id not in self._resumed or not await self._bound(conversation_id, stream):
            return False
        self._resumed.discard(conversation_id)
        assert stream.streamer is not None and stream.thread is not None
        found = await stream.streamer.left_open(stream.thread, OPENING)
        if found is None:
            return False
        log.info("taking over the stream %s left open in %s", found, conversation_id)
        stream.message, stream.open, stream.pushing = found, True, False
        return True

    async def _step(self, conversation_id: str, stream: _Stream) -> float:
        """Stream what the redaction releases: start the stream, or append to it; the
        seconds to wait before the next call."""
        if not await self._bound(conversation_id, stream):
            stream.pushing = False  # nowhere to stream: the row is posted as before
            return 0.0
        if stream.message is None and await self._taken_over(conversation_id, stream):
            return 0.0
        streamer, thread = stream.streamer, stream.thread
        assert streamer is not None and thread is not None
        stream.out += stream.redaction.feed(stream.text[stream.fed :])
        stream.fed = len(stream.text)
        if not stream.out:
            return 0.0
        if stream.shown + len(stream.out) + len(OPENING) + len(TOO_LONG) > streamer.stream_limit:
            stream.too_long, stream.pushing = True, False
            if stream.open and stream.message is not None:
                with contextlib.suppress(DeliveryError):
                    await streamer.stop_stream(thread, stream.message, TOO_LONG)
                stream.open = False
            return 0.0
        try:
            if stream.message is None:
                text = OPENING + stream.out
                stream.message = await streamer.start_stream(thread, stream.recipient, text)
                stream.open, stream.shown = True, len(text)
            else:
                await streamer.append_stream(thread, stream.message, stream.out)
                stream.shown += len(stream.out)
            stream.out = ""
        except RateLimited as exc:
            return max(exc.retry_after, self._every)  # what was released waits till then
        except StreamEnded:
            stream.open, stream.pushing = False, False
        except DeliveryError as exc:
            log.warning("streaming the answer of %s failed: %s", conversation_id, exc)
            stream.open, stream.pushing = False, False
        return self._every
