"""The output of a command as the tool keeps it: decoded, redacted, head and tail."""

from __future__ import annotations

import codecs

from core.secrets import RedactionStream


class Capture:
    """Decoded output (UTF-8, bad bytes replaced) kept to ``limit`` characters: head + tail.

    Secrets are redacted as the output streams in (``redaction``), before the cut, so
    a token split across two reads, or by the cut, never survives in part.
    """

    def __init__(self, limit: int, redaction: RedactionStream | None = None) -> None:
        self._redaction = redaction
        self._head_room = max(0, limit) // 2
        self._tail_room = max(0, limit) - self._head_room
        self._head = ""
        self._tail = ""
        self._total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, *, final: bool = False) -> None:
        """Take the next bytes of output; memory stays within ``limit`` characters."""
        text = self._decoder.decode(data, final)
        if self._redaction is not None:
            text = self._redaction.feed(text)
            if final:
                text += self._redaction.finish()
        self._total += len(text)
        room = self._head_room - len(self._head)
        if room > 0:
            self._head += text[:room]
            text = text[room:]
        if text and self._tail_room:
            self._tail = (self._tail + text)[-self._tail_room :]

    @property
    def cut(self) -> int:
        """Characters left out so far (between the head and the tail)."""
        return self._total - len(self._head) - len(self._tail)

    def finish(self) -> str:
        """The kept output, with a marker where characters were cut. Call once, at the end."""
        self.feed(b"", final=True)
        cut = self.cut
        if cut:
            return f"{self._head}\n[... {cut} characters cut ...]\n{self._tail}"
        return self._head + self._tail
