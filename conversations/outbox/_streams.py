"""Streamed answers: a turn's text and answer pushed into the thread while the model writes them.

The engine tells :class:`AnswerStreams` (its :class:`core.run.preview.AnswerPreview`)
the turn's text so far and its ``finish`` answer so far; a task of the conversation
pushes what is new to the platform's :class:`conversations.adapter.AnswerStreamer`
(Slack's ``chat.startStream`` / ``appendStream``), and the row that says it for good
finalises it (docs/architecture.md "Streamed answers"):

- A turn's text streams opening with the progress note's mark (:data:`WRITING`, ``⏳ ``),
  and the turn's progress note finalises it (the turn ends in tool calls, or in prose
  where a call is due: :mod:`core.run.nudges`): the first note row whose text is the
  turn's, sent alone at once, whatever the progress mode. The ``finish`` answer
  streams in a message of its own, opening with :data:`OPENING`, and the answer's row
  finalises it. Each conversation keeps its turns' texts oldest first, so a turn's
  text never takes a later turn's row.

- A stream starts only when the deliverer may send the conversation's next row now:
  no worker of it busy, this process holding its delivery claim, and no row of it
  pending (so the plan, the notes and the session's status are in the thread first);
  a worker that ends tells it to look again (:meth:`AnswerStreams.nudge`).
- Every preview goes through a :class:`core.secrets.RedactionStream`: a tail that may
  be the start of a secret is held back until the next piece shows it is not, so a
  token split across two pieces is never shown, even in part.
- The finalising row, when its turn comes (:meth:`AnswerStreams.finalising`), is sent
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

Nothing here is stored. A process that dies leaves its stream open; where a run goes on
after another process left it (a restart, a takeover: :meth:`AnswerStreams.resumed`,
told by the hub), the thread is looked at once (``conversations.replies`` on Slack) for
such a stream (:meth:`AnswerStreamer.left_open`: the bot's newest message there, a
stream never stopped, opening with either mark), before a stream of its own starts or an
answer that streamed nothing here goes out. One found is taken over: nothing more is
streamed into it, and the finalising row stops it and edits its whole text in. So a
restart in the middle of a stream leaves one whole answer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Container, Mapping

from conversations.adapter import AnswerStreamer, Sender
from conversations.errors import DeliveryError, RateLimited, StreamEnded
from conversations.events import TOO_LONG, StreamedPreview
from conversations.outbox._claims import ClaimedDelivery
from conversations.outbox._clock import Clock, MonotonicClock
from conversations.outbox._known import KnownRows
from conversations.outbox._previews import OPENINGS, WRITING, Previews, Stream
from conversations.store import ConversationInfo
from core.secrets import NO_SECRETS, Redactor

log = logging.getLogger("conversations.outbox")

EVERY = 0.6
"""Seconds at least between two calls of one stream: at most 100 a minute, Slack's Tier 4
for ``chat.appendStream`` (https://docs.slack.dev/reference/methods/chat.appendStream)."""

ConversationLookup = Callable[[str], Awaitable[ConversationInfo | None]]
"""A conversation's binding and requester, by its id (the store's ``threads.find``)."""


async def _nowhere(_conversation_id: str) -> ConversationInfo | None:
    return None  # streams nothing (a deliverer built without the engine's streams)


class AnswerStreams:
    """Streams each conversation's turns' texts and answer while they are written (see
    the module docstring).

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
        self._streams: dict[str, Previews] = {}
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

    def wrote(self, conversation_id: str, text: str) -> None:
        """The turn's text so far; pushed by the conversation's task when it may go."""
        previews = self._streams.setdefault(conversation_id, Previews())
        previews.prune()
        if not previews.texts or previews.texts[-1].turn_over:
            previews.texts.append(Stream(redaction=self._redactor.stream(), opening=WRITING))
        self._grow(conversation_id, previews.texts[-1], text)

    def grew(self, conversation_id: str, text: str) -> None:
        """The answer so far; pushed by the conversation's task when it may go."""
        previews = self._streams.setdefault(conversation_id, Previews())
        if previews.answer is None:
            previews.answer = Stream(redaction=self._redactor.stream())
        self._grow(conversation_id, previews.answer, text)

    def _grow(self, conversation_id: str, stream: Stream, text: str) -> None:
        if not stream.pushing:
            stream.text = text
            return
        if not text.startswith(stream.text[: stream.fed]):
            # Another response (the one before broke off): what was shown stays, and
            # the finalising row edits the whole text in.
            stream.pushing = stream.message is None
            stream.redaction, stream.fed, stream.out = self._redactor.stream(), 0, ""
        stream.text = text
        stream.changed.set()
        if stream.pushing and (stream.task is None or stream.task.done()):
            stream.task = asyncio.create_task(
                self._push(conversation_id, stream), name=f"stream {conversation_id}"
            )

    def ended(self, conversation_id: str, whole: bool) -> None:
        """The turn ended: when ``whole``, its text is told no more (its note's row
        finalises what was shown; a later turn's text streams anew)."""
        previews = self._streams.get(conversation_id)
        if whole and previews is not None and previews.texts:
            previews.texts[-1].turn_over = True
            previews.prune()
            self._tidy(conversation_id)

    # --- the deliverer's ---------------------------------------------------------

    def resumed(self, conversation_id: str) -> None:
        """The conversation's run goes on here after another process left it: look for a
        stream of its answer left open before streaming or finalising it."""
        self._resumed.add(conversation_id)

    def nudge(self, conversation_id: str) -> None:
        """Look again whether the conversation may be streamed (a worker of it ended)."""
        for stream in self._streams.get(conversation_id, Previews()).all():
            stream.changed.set()

    def _finalised(self, previews: Previews, text: str, answer: bool) -> Stream | None:
        """The preview a row of ``text`` finalises: an answer's row its ``finish``
        answer's; a note's row the oldest turn's text, once that turn ended, when the
        note says it."""
        if previews.taken is not None:
            return previews.taken  # a row sent again (a rate limit, a failure)
        if answer:
            return previews.answer
        oldest = previews.texts[0] if previews.texts else None
        if oldest is not None and oldest.turn_over and oldest.says(text):
            return oldest
        return None

    async def finalising(
        self, conversation_id: str, text: str, *, answer: bool = True
    ) -> StreamedPreview | None:
        """The preview the row saying ``text`` finalises (``answer``: the answer's row,
        else a note's; None: post it as before); nothing is streamed into it after
        this. Waits for a push under way; an answer that streamed nothing here looks
        for a stream left open first."""
        previews = self._streams.get(conversation_id)
        stream = None if previews is None else self._finalised(previews, text, answer)
        if stream is None:
            if not answer or self._known is None or conversation_id not in self._resumed:
                return None
            stream = Stream(redaction=self._redactor.stream(), pushing=False)
            previews = self._streams.setdefault(conversation_id, Previews())
            previews.answer = stream
        assert previews is not None
        previews.taken = stream
        async with stream.lock:
            self._halt(stream)
            if answer and stream.message is None and not stream.too_long:
                await self._taken_over(conversation_id, stream)
            if stream.message is None or stream.too_long:
                previews.taken = None  # nothing shown to finalise: posted as before
                previews.forget(stream)
                self._tidy(conversation_id)
                return None
            return StreamedPreview(message=stream.message, open=stream.open)

    def settled(self, conversation_id: str) -> None:
        """The finalising row went out: forget its preview (what follows streams anew)."""
        previews = self._streams.get(conversation_id)
        if previews is None or previews.taken is None:
            return
        stream, previews.taken = previews.taken, None
        previews.forget(stream)
        self._halt(stream)
        self._resumed.discard(conversation_id)
        self._tidy(conversation_id)

    def _tidy(self, conversation_id: str) -> None:
        """Forget a conversation with no preview left (nothing is kept per conversation)."""
        previews = self._streams.get(conversation_id)
        if previews is not None and not previews.all() and previews.taken is None:
            del self._streams[conversation_id]

    async def close(self, conversation_id: str) -> None:
        """Close the conversation's streams as they are (another milestone comes first),
        or, in a conversation resumed here, a stream a process left open in its thread."""
        previews = self._streams.pop(conversation_id, None)
        streams = [] if previews is None else previews.all()
        if not streams and conversation_id in self._resumed and self._known is not None:
            left = Stream(redaction=self._redactor.stream(), pushing=False)
            await self._taken_over(conversation_id, left)
            streams = [left]
        self._resumed.discard(conversation_id)
        for stream in streams:
            async with stream.lock:
                self._halt(stream)
                if stream.open and stream.streamer is not None and stream.thread is not None:
                    assert stream.message is not None
                    with contextlib.suppress(DeliveryError):
                        await stream.streamer.stop_stream(stream.thread, stream.message, "")
                    stream.open = False

    def cancel(self) -> None:
        """Stop pushing anything (the deliverer stops)."""
        for previews in self._streams.values():
            for stream in previews.all():
                if stream.task is not None:
                    stream.task.cancel()

    # --- pushing ----------------------------------------------------------------

    @staticmethod
    def _halt(stream: Stream) -> None:
        stream.pushing = False
        stream.changed.set()

    async def _push(self, conversation_id: str, stream: Stream) -> None:
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

    async def _bound(self, conversation_id: str, stream: Stream) -> bool:
        """Whether the conversation has a thread and a streamer (found once)."""
        if stream.streamer is None and not stream.looked_up:
            stream.looked_up = True
            info = await self._conversation(conversation_id)
            streamer = self._streamer(info.binding.platform) if info is not None else None
            if info is not None and streamer is not None and info.binding.thread is not None:
                stream.streamer, stream.thread = streamer, info.binding
                stream.recipient = info.requester.id
        return stream.streamer is not None

    async def _taken_over(self, conversation_id: str, stream: Stream) -> bool:
        """Take over a stream a dead process left open in the thread (the module
        docstring): the answer's row stops it and edits the whole answer in."""
        if conversation_id not in self._resumed or not await self._bound(conversation_id, stream):
            return False
        self._resumed.discard(conversation_id)
        assert stream.streamer is not None and stream.thread is not None
        found = await stream.streamer.left_open(stream.thread, OPENINGS)
        if found is None:
            return False
        log.info("taking over the stream %s left open in %s", found, conversation_id)
        stream.message, stream.open, stream.pushing = found, True, False
        return True

    async def _step(self, conversation_id: str, stream: Stream) -> float:
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
        if (
            stream.shown + len(stream.out) + len(stream.opening) + len(TOO_LONG)
            > streamer.stream_limit
        ):
            stream.too_long, stream.pushing = True, False
            if stream.open and stream.message is not None:
                with contextlib.suppress(DeliveryError):
                    await streamer.stop_stream(thread, stream.message, TOO_LONG)
                stream.open = False
            return 0.0
        try:
            if stream.message is None:
                text = stream.opening + stream.out
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
