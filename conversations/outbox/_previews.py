"""The previews of one conversation: each a stream's bookkeeping (what the run told,
what went out), its turns' texts oldest first and its answer (docs/architecture.md
"Streamed answers"; :class:`conversations.outbox._streams.AnswerStreams` pushes and
finalises them)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from conversations.adapter import AnswerStreamer
from conversations.events import PlatformRef
from core.secrets import RedactionStream

OPENING = "✅ "
"""How a streamed answer opens: its mark (:func:`conversations.render.render_event`)."""
WRITING = "⏳ "
"""How a turn's streamed text opens: a progress note's mark (its row's, when the turn ends
in tool calls: :func:`conversations.render.render_event`)."""
OPENINGS = (OPENING, WRITING)


@dataclass
class Stream:
    """One preview: what the run told, what went out."""

    redaction: RedactionStream
    opening: str = OPENING
    """The mark the streamed message opens with."""
    turn_over: bool = False
    """The turn that wrote it ended whole: a row finalises it, nothing more is told."""
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

    def says(self, text: str) -> bool:
        """Whether ``text``, a row's, says this preview's text whole after its mark."""
        return bool(self.text) and text.partition(" ")[2].startswith(self.text)


@dataclass
class Previews:
    """One conversation's previews: its turns' texts, oldest first, and its answer."""

    texts: list[Stream] = field(default_factory=list)
    answer: Stream | None = None
    taken: Stream | None = None
    """The preview a row is finalising until it went
    (:meth:`conversations.outbox._streams.AnswerStreams.finalising`)."""

    def all(self) -> list[Stream]:
        """Every preview of the conversation, its turns' texts first."""
        return [*self.texts, *([self.answer] if self.answer is not None else [])]

    def forget(self, stream: Stream) -> None:
        """Drop ``stream`` (finalised, or nothing shown to finalise)."""
        if stream in self.texts:
            self.texts.remove(stream)
        if stream is self.answer:
            self.answer = None

    def prune(self) -> None:
        """Forget the ended turns' texts that showed nothing and are not being shown."""
        for stream in [s for s in self.texts if s.turn_over and s.message is None]:
            if not stream.lock.locked():
                stream.pushing = False
                stream.changed.set()
                self.texts.remove(stream)
