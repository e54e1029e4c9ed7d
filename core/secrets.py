"""Redaction of secrets: tokens and keys become ``[redacted NAME]`` wherever text is kept.

One :class:`Redactor`, built from the bot's named secrets (``{"SLACK_BOT_TOKEN":
"xoxb-..."}``), is applied where tool output is stored (the engine's tool runner),
where text is posted to a thread (the outbox's senders), and to log records
(:class:`RedactingFilter`). Output that arrives in chunks (a command's output) goes
through a :class:`RedactionStream`, so a token split across two chunks is redacted
too.

Pure: no I/O, nothing read from the environment.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

MIN_SECRET_CHARS = 8
"""Values shorter than this are not redacted: they are no real token or key, and
replacing them would mangle ordinary text (an empty value would match everywhere)."""


def marker(name: str) -> str:
    """What stands in for the secret ``name``: ``[redacted NAME]``."""
    return f"[redacted {name}]"


class Redactor:
    """Replaces every occurrence of the given secret values by ``[redacted NAME]``.

    ``secrets`` maps a name (the setting's variable, e.g. ``SLACK_BOT_TOKEN``) to its
    value. Values shorter than :data:`MIN_SECRET_CHARS` characters, and empty ones,
    are ignored; a value given under two names is redacted under the first.

    Where occurrences overlap, the longest secret that starts first wins; a secret
    inside it (nested) leaves no trace, and one that runs on past its end
    (overlapping) adds its own marker right after: ``[redacted A][redacted B]``.
    No character of any occurrence is ever shown.

    A Redactor without secrets (``Redactor()``, :data:`NO_SECRETS`) returns text as
    is, at no cost. Immutable; safe to share between tasks and threads.
    """

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        names: dict[str, str] = {}
        for name, value in (secrets or {}).items():
            if len(value) >= MIN_SECRET_CHARS and value not in names:
                names[value] = name
        self._secrets = sorted(names.items(), key=lambda item: -len(item[0]))
        """``(value, name)``, longest value first."""
        self.longest = len(self._secrets[0][0]) if self._secrets else 0
        """Characters of the longest secret (0 without secrets)."""
        self._prefixes = frozenset(v[:n] for v, _ in self._secrets for n in range(1, len(v)))
        """Every proper prefix of every secret: a text ending in one may go on into it."""

    def __bool__(self) -> bool:
        """Whether there is any secret to redact."""
        return bool(self._secrets)

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of a secret replaced by ``[redacted NAME]``."""
        if not self._secrets:
            return text
        out, _ = self._render(text, stop=len(text), pos=0)
        return out

    def stream(self) -> RedactionStream:
        """A new :class:`RedactionStream` for one output that arrives in chunks."""
        return RedactionStream(self)

    # --- shared by redact() and the stream -----------------------------------------

    def _render(self, text: str, *, stop: int, pos: int) -> tuple[str, int]:
        """Redact ``text`` up to ``stop``: occurrences starting before ``stop`` (each one
        wholly inside ``text``), and the plain text between them.

        ``pos``: the first character not released yet (those before it were released,
        or covered by a marker). Returns the text to release and the new ``pos``, which
        is ``stop``, or past it when a marker covers characters after ``stop``.
        """
        found: list[tuple[int, int, str]] = []
        for value, name in self._secrets:
            at = text.find(value, max(0, pos - len(value) + 1))  # it may end past pos
            while at != -1 and at < stop:
                found.append((at, at + len(value), name))
                at = text.find(value, at + 1)
        found.sort(key=lambda o: (o[0], o[0] - o[1]))  # by start, the longest first
        out: list[str] = []
        for start, end, name in found:
            if end <= pos:
                continue  # nested in a secret already redacted
            if start > pos:
                out.append(text[pos:start])
            out.append(marker(name))
            pos = end
        if pos < stop:
            out.append(text[pos:stop])
            pos = stop
        return "".join(out), pos

    def _undecided(self, text: str) -> int:
        """The first position of ``text`` where a secret may start but is cut off by the
        end of ``text`` (what follows decides); ``len(text)`` when there is none.

        Every occurrence starting before it lies wholly inside ``text``. At most
        ``longest - 1`` characters from the end.
        """
        for at in range(max(0, len(text) - self.longest + 1), len(text)):
            if text[at:] in self._prefixes:
                return at
        return len(text)


NO_SECRETS = Redactor()
"""The redactor without secrets: every text as it is."""


class RedactionStream:
    """Redacts one output that arrives in chunks (a command's stdout), as a whole.

    :meth:`feed` returns the redacted text that is safe to release now and holds
    back the end of the output where a secret may begin (at most
    ``redactor.longest - 1`` characters, only while they could be the start of a
    secret); :meth:`finish` releases what is held. The releases joined equal
    ``redactor.redact(whole output)``, however the output was cut into chunks::

        stream = redactor.stream()
        for chunk in chunks:
            keep(stream.feed(chunk))
        keep(stream.finish())

    Without secrets, :meth:`feed` returns each chunk as is. Not thread-safe: one
    stream per output, fed from one task.
    """

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""
        """The end of the output not released yet (where a secret may start)."""
        self._covered = 0
        """Leading characters of ``_held`` already covered by a released marker."""

    @property
    def held(self) -> int:
        """Characters received and not released yet."""
        return max(0, len(self._held) - self._covered)

    def feed(self, chunk: str) -> str:
        """Take the next ``chunk``; return the redacted text that may be released now."""
        if not self._redactor:
            return chunk
        text = self._held + chunk
        stop = self._redactor._undecided(text)
        out, pos = self._redactor._render(text, stop=stop, pos=self._covered)
        self._held, self._covered = text[stop:], pos - stop
        return out

    def finish(self) -> str:
        """The output has ended: release the redacted rest. The stream may be fed again
        afterwards, as a new output."""
        if not self._redactor:
            return ""
        out, _ = self._redactor._render(self._held, stop=len(self._held), pos=self._covered)
        self._held, self._covered = "", 0
        return out


class RedactingFilter(logging.Filter):
    """A log filter that redacts secrets from each record: its message with its
    arguments, its exception's traceback and its stack.

    Install it on a handler (``handler.addFilter(...)``), which sees every record it
    writes, including those of child loggers; a logger's own filter does not. The
    record is changed in place (``msg`` becomes the redacted message, ``args``
    empty), so every handler after it writes the redacted text. Never drops a record.
    """

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact ``record`` in place; always True."""
        if not self._redactor:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it when it formats
            return True
        redacted = self._redactor.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self._redactor.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self._redactor.redact(record.stack_info)
        return True
