"""Where a chat message's text is code or a quote: the reading both chat markups share.

Slack's mrkdwn and Discord's markdown mark code the same way: a fenced block between
two runs of three backticks, and inline code between two equal runs of one or two
backticks (https://docs.slack.dev/messaging/formatting-message-text#basic-formatting,
https://support.discord.com/hc/en-us/articles/210298617-Markdown-Text-101-Chat-Formatting-Bold-Italic-Underline).
A quote is a line that starts with a marker, or everything after a "rest of the
message" marker; the markers differ per platform and are passed in (Slack escapes
``>`` as ``&gt;`` in message text, Discord wants ``> `` and ``>>> `` with a space).

:func:`hidden_spans` gives the spans of ``text`` that are code or quoted, so that a
caller can tell whether a token (a mention) stands in the plain text
(:func:`in_plain_text`), and cut the ones that do (:func:`without_tokens`). It reads the
markup the way the clients render it, closely enough for that question: an opening
run of backticks that is never closed is literal text, as the clients show it; code
inside a quote is hidden either way. It is linear in the length of the text and
never raises.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Span = tuple[int, int]
"""``[start, end)`` character offsets into the text."""

_FENCE = "```"


@dataclass(frozen=True)
class QuoteMarkers:
    """How a platform marks quotes at the start of a line.

    ``line``: prefixes that quote the rest of their line; ``rest``: prefixes that
    quote the rest of the message (tried first).
    """

    line: tuple[str, ...]
    rest: tuple[str, ...] = ()


def hidden_spans(text: str, quotes: QuoteMarkers) -> list[Span]:
    """The sorted, non-overlapping spans of ``text`` that are code or quoted."""
    code = _code_spans(text)
    return _merge(code + _quote_spans(text, quotes, code))


def is_hidden(spans: Sequence[Span], start: int, end: int) -> bool:
    """Whether ``[start, end)`` overlaps one of ``spans`` (sorted, non-overlapping)."""
    last = bisect.bisect_left(spans, (end,)) - 1  # the last span that starts before ``end``
    return last >= 0 and spans[last][1] > start


def occurrences(text: str, tokens: Iterable[str]) -> list[Span]:
    """The spans of every occurrence of each of ``tokens`` in ``text`` (not overlapping itself)."""
    found: list[Span] = []
    for token in tokens:
        at = text.find(token)
        while at != -1:
            found.append((at, at + len(token)))
            at = text.find(token, at + len(token))
    return found


def in_plain_text(hidden: Sequence[Span], found: Iterable[Span]) -> list[Span]:
    """The spans of ``found`` (tokens) that overlap none of ``hidden``, sorted."""
    return sorted(span for span in found if not is_hidden(hidden, *span))


def without_tokens(text: str, found: Iterable[Span], quotes: QuoteMarkers) -> str:
    """``text`` with the ``found`` token spans that stand in its plain text cut out.

    One space or tab right after a cut token goes with it (``"<@B> hi"`` gives
    ``"hi"``); tokens inside code or quotes (:func:`hidden_spans`) stay, as part of
    what the person showed or quoted. A span that overlaps one cut already is kept.
    """
    kept, at = [], 0
    for start, end in in_plain_text(hidden_spans(text, quotes), found):
        if start < at:
            continue
        kept.append(text[at:start])
        at = end + (1 if end < len(text) and text[end] in " \t" else 0)
    kept.append(text[at:])
    return "".join(kept)


def _code_spans(text: str) -> list[Span]:
    """Fenced blocks and inline code, scanning backtick runs left to right.

    A run of three or more opens a fenced block that the next run of three or
    more closes; a run of one or two opens inline code that the next run of the
    same length closes. An opening that is never closed is literal. Each search
    starts where the last span or run ended, so the scan stays linear.
    """
    spans: list[Span] = []
    at = text.find("`")
    while at != -1:
        end = at + _run_length(text, at)
        if end - at >= 3:
            close = text.find(_FENCE, end)
            close_end = close + _run_length(text, close) if close != -1 else -1
        else:
            close = _closing_run(text, end, end - at)
            close_end = close + (end - at) if close != -1 else -1
        if close_end != -1:
            spans.append((at, close_end))
            end = close_end
        at = text.find("`", end)
    return spans


def _run_length(text: str, at: int) -> int:
    end = at
    while end < len(text) and text[end] == "`":
        end += 1
    return end - at


def _closing_run(text: str, start: int, run: int) -> int:
    """Where the next run of exactly ``run`` backticks after ``start`` begins, or -1."""
    at = text.find("`", start)
    while at != -1:
        length = _run_length(text, at)
        if length == run:
            return at
        at = text.find("`", at + length)
    return -1


def _quote_spans(text: str, quotes: QuoteMarkers, code: list[Span]) -> list[Span]:
    """Quoted lines, and the rest of the message after a "rest" marker.

    A line counts only when it starts outside code (a ``>`` inside a fenced block
    is code, not a quote).
    """
    spans: list[Span] = []
    start = 0
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end == -1 else end
        if not is_hidden(code, start, start + 1):
            if any(text.startswith(marker, start) for marker in quotes.rest):
                spans.append((start, len(text)))
                break
            if any(text.startswith(marker, start) for marker in quotes.line):
                spans.append((start, end))
        start = end + 1
    return spans


def _merge(spans: list[Span]) -> list[Span]:
    merged: list[Span] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
