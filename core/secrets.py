"""Redaction of secrets: tokens and keys become ``[redacted NAME]`` wherever text is kept.

One :class:`Redactor`, built from the bot's named secrets (``{"SLACK_BOT_TOKEN":
"xoxb-..."}``) and told the tokens of new installs as they are stored
(:meth:`Redactor.add`), is applied where tool output is stored (the engine's tool
runner), where text is posted to a thread (the outbox's senders), and to log records
(:class:`RedactingFilter`). Output that arrives in chunks (a command's output) goes
through a :class:`RedactionStream`, so a token split across two chunks is redacted
too.

Pure: no I/O, nothing read from the environment.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

MIN_SECRET_CHARS = 8
"""Values shorter than this are not redacted: they are no real token or key, and
replacing them would mangle ordinary text (an empty value would match everywhere)."""


def marker(name: str) -> str:
    """What stands in for the secret ``name``: ``[redacted NAME]``."""
    return f"[redacted {name}]"


@dataclass(frozen=True)
class _Known:
    """The secrets a :class:`Redactor` knows at one moment, swapped whole when one is added."""

    secrets: tuple[tuple[str, str], ...] = ()
    """``(value, name)``, longest value first."""
    longest: int = 0
    prefixes: frozenset[str] = frozenset()
    """Every proper prefix of every secret: a text ending in one may go on into it."""

    @classmethod
    def of(cls, names: Mapping[str, str]) -> _Known:
        """From ``{value: name}``."""
        ordered = tuple(sorted(names.items(), key=lambda item: -len(item[0])))
        return cls(
            secrets=ordered,
            longest=len(ordered[0][0]) if ordered else 0,
            prefixes=frozenset(v[:n] for v, _ in ordered for n in range(1, len(v))),
        )


class Redactor:
    """Replaces every occurrence of the given secret values by ``[redacted NAME]``.

    ``secrets`` maps a name (the setting's variable, e.g. ``SLACK_BOT_TOKEN``) to its
    value. Values shorter than :data:`MIN_SECRET_CHARS` characters, and empty ones,
    are ignored; a value given under two names is redacted under the first.

    Where occurrences overlap, the longest secret that starts first wins; a secret
    inside it (nested) leaves no trace, and one that runs on past its end
    (overlapping) adds its own marker right after: ``[redacted A][redacted B]``.
    No character of any occurrence is ever shown.

    It learns secrets while it runs (:meth:`add`: a workspace's token stored by an
    install, docs/architecture.md, "Several instances"): from that moment every text it
    redacts, on any task or thread, loses the new one too. What it knows is swapped
    whole, so a call sees the secrets before an ``add`` or after it, never half of
    them; safe to share between tasks and threads. :data:`NO_SECRETS` never learns
    (``frozen``): it returns text as is, at no cost.
    """

    def __init__(self, secrets: Mapping[str, str] | None = None, *, frozen: bool = False) -> None:
        names: dict[str, str] = {}
        for name, value in (secrets or {}).items():
            if len(value) >= MIN_SECRET_CHARS and value not in names:
                names[value] = name
        self._names = names
        self._known = _Known.of(names)
        self._frozen = frozen
        self._adding = threading.Lock()

    @property
    def longest(self) -> int:
        """Characters of the longest secret (0 without secrets)."""
        return self._known.longest

    def __bool__(self) -> bool:
        """Whether there is any secret to redact now."""
        return bool(self._known.secrets)

    @property
    def grows(self) -> bool:
        """Whether :meth:`add` may give it secrets later (False for :data:`NO_SECRETS`)."""
        return not self._frozen

    def add(self, name: str, value: str) -> bool:
        """Redact ``value`` as ``[redacted NAME]`` from now on; whether it is new (a value
        shorter than :data:`MIN_SECRET_CHARS`, or known already, changes nothing).

        Raises ``TypeError`` on a frozen redactor (:data:`NO_SECRETS`)."""
        if self._frozen:
            raise TypeError("this redactor takes no secrets (NO_SECRETS)")
        if len(value) < MIN_SECRET_CHARS or value in self._names:
            return False
        with self._adding:
            if value in self._names:
                return False
            names = {**self._names, value: name}
            self._known = _Known.of(names)
            self._names = names
        return True

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of a secret replaced by ``[redacted NAME]``."""
        known = self._known
        if not known.secrets:
            return text
        out, _ = _render(known, text, stop=len(text), pos=0)
        return out

    def stream(self) -> RedactionStream:
        """A new :class:`RedactionStream` for one output that arrives in chunks."""
        return RedactionStream(self)


def _render(known: _Known, text: str, *, stop: int, pos: int) -> tuple[str, int]:
    """Redact ``text`` up to ``stop``: occurrences starting before ``stop`` (each one
    wholly inside ``text``), and the plain text between them.

    ``pos``: the first character not released yet (those before it were released,
    or covered by a marker). Returns the text to release and the new ``pos``, which
    is ``stop``, or past it when a marker covers characters after ``stop``.
    """
    found: list[tuple[int, int, str]] = []
    for value, name in known.secrets:
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


def _undecided(known: _Known, text: str) -> int:
    """The first position of ``text`` where a secret may start but is cut off by the
    end of ``text`` (what follows decides); ``len(text)`` when there is none.

    Every occurrence starting before it lies wholly inside ``text``. At most
    ``longest - 1`` characters from the end.
    """
    for at in range(max(0, len(text) - known.longest + 1), len(text)):
        if text[at:] in known.prefixes:
            return at
    return len(text)


NO_SECRETS = Redactor(frozen=True)
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

    Without secrets, :meth:`feed` returns each chunk as is. Each chunk is redacted with
    the secrets known when it is fed: a secret added while an output streams is taken
    out of what is fed after (what was held back is still checked for it). Not
    thread-safe: one stream per output, fed from one task.
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
        known = self._redactor._known  # one snapshot for this chunk
        stop = _undecided(known, text)
        out, pos = _render(known, text, stop=stop, pos=self._covered)
        self._held, self._covered = text[stop:], pos - stop
        return out

    def finish(self) -> str:
        """The output has ended: release the redacted rest. The stream may be fed again
        afterwards, as a new output."""
        if not self._redactor:
            return ""
        known = self._redactor._known
        out, _ = _render(known, self._held, stop=len(self._held), pos=self._covered)
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
