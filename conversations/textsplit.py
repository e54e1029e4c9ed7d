"""Split long chat text into chunks a platform accepts, without breaking code blocks.

Platforms cap the length of one message (Slack: about 4,000 characters of ``text``
and 3,000 per section block; Discord: 2,000), and a model's answer can be longer.
:func:`split_text` cuts such text into ordered chunks of at most ``limit``
characters, at the best boundary it can find: a blank line (paragraph), else a
line break, else a space, else anywhere. A chunk that ends inside a fenced code
block (a line of three or more backticks, optionally with an info string such as
``python``) is closed with a fence at its end, and the block is reopened with the
same fence and info string at the start of the next chunk, so each chunk renders
on its own. The added fences count toward ``limit``.

Nothing is lost or reordered: stripping the added fences from the chunks and
joining them gives the original text, apart from the whitespace dropped at each
split point (a line's indentation is kept).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

MIN_LIMIT = 20
"""The smallest ``limit`` :func:`split_text` accepts (room for two fences and text)."""

_FENCE_LINE = re.compile(r"^ {0,3}(`{3,})([^`\n]*)$")
_PARAGRAPH, _LINE, _WORD = 0, 1, 2


@dataclass(frozen=True)
class _Fence:
    """An open code block: its backtick run and its info string (``python``)."""

    ticks: str
    info: str

    @property
    def opener(self) -> str:
        return f"{self.ticks}{self.info}\n"

    @property
    def closer(self) -> str:
        return f"\n{self.ticks}"


@dataclass(frozen=True)
class _FenceLine:
    start: int
    end: int
    """End of the line's text, before its newline."""
    opens: bool
    after: _Fence | None
    """The open code block after this line (None when it closes one)."""


class _FenceMap:
    """Which code block is open at each position of a text."""

    def __init__(self, text: str) -> None:
        self.lines: list[_FenceLine] = []
        open_fence: _Fence | None = None
        start = 0
        for line in text.split("\n"):
            match = _FENCE_LINE.match(line)
            if match:
                ticks, info = match.group(1), match.group(2)
                if open_fence is None:
                    open_fence = _Fence(ticks, info.strip())
                    self.lines.append(_FenceLine(start, start + len(line), True, open_fence))
                elif not info.strip() and len(ticks) >= len(open_fence.ticks):
                    open_fence = None
                    self.lines.append(_FenceLine(start, start + len(line), False, None))
            start += len(line) + 1
        self._ends = [line.end for line in self.lines]

    def at(self, pos: int) -> _Fence | None:
        """The block open at ``pos``: fence lines that end at or before ``pos`` count."""
        index = bisect_right(self._ends, pos)
        return self.lines[index - 1].after if index else None

    def splits_fence_line(self, pos: int) -> bool:
        """Whether a cut at ``pos`` falls inside a fence line, or makes an empty block.

        A cut just after an opening fence or just before a closing one would leave
        a chunk with an empty code block, so it counts as splitting the fence.
        """
        index = bisect_right(self._ends, pos)
        if index < len(self.lines):
            line = self.lines[index]
            if line.start < pos or (line.start == pos and not line.opens):
                return True
        if index and self.lines[index - 1].end == pos and self.lines[index - 1].opens:
            return True
        return False

    def block_boundary(self, end: int, start: int) -> bool:
        """Whether a line break ``[end, start)`` sits right before or after a code block."""
        index = bisect_right(self._ends, end)
        before = self.lines[index - 1] if index else None
        after = self.lines[index] if index < len(self.lines) else None
        closes_before = before is not None and before.end == end and not before.opens
        opens_after = after is not None and after.start == start and after.opens
        return closes_before or opens_after


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into chunks of at most ``limit`` characters, in order.

    Boundaries are preferred in this order: a blank line or the edge of a code
    block, a line break, a space; a chunk is cut anywhere only when it has no
    whitespace to cut at. A boundary is used only if it fills at least half the
    chunk, otherwise the next kind is tried. The whitespace at a split point is
    dropped (trailing spaces and the line breaks; the next line's indentation is
    kept). A code block cut in two is closed with its fence at the end of one
    chunk and reopened with the same fence and info string at the start of the
    next; these added characters count toward ``limit``. An empty ``text`` gives
    ``[]``; a ``text`` of at most ``limit`` characters comes back as the only chunk.

    Raises ``ValueError`` when ``limit`` is below :data:`MIN_LIMIT` (20).
    """
    if limit < MIN_LIMIT:
        raise ValueError(f"limit must be at least {MIN_LIMIT} characters, got {limit}")
    if len(text) <= limit:
        return [text] if text else []
    fences = _FenceMap(text)
    chunks: list[str] = []
    pos = 0
    while pos < len(text):
        fence = _usable(fences.at(pos), limit)
        opener = fence.opener if fence else ""
        budget = limit - len(opener)
        if len(text) - pos <= budget:
            rest = text[pos:]
            if rest.strip():
                chunks.append(opener + rest)
            break
        end, start = _cut(text, pos, budget, fences, limit)
        closing = _usable(fences.at(end), limit)
        chunks.append(opener + text[pos:end] + (closing.closer if closing else ""))
        pos = start
    return chunks


def _usable(fence: _Fence | None, limit: int) -> _Fence | None:
    """``fence`` if reopening and closing it leaves room for text, else None.

    A long info string is dropped from the reopened fence; a backtick run too long
    for ``limit`` (pathological) is not repeated at all.
    """
    if fence is None:
        return None
    if len(fence.opener) + len(fence.closer) <= limit // 2:
        return fence
    bare = _Fence(fence.ticks, "")
    return bare if len(bare.opener) + len(bare.closer) <= limit // 2 else None


def _cut(text: str, pos: int, budget: int, fences: _FenceMap, limit: int) -> tuple[int, int]:
    """``(end, start)``: the chunk is ``text[pos:end]``, the next begins at ``start``."""

    def fits(end: int) -> bool:
        closing = _usable(fences.at(end), limit)
        return end - pos + (len(closing.closer) if closing else 0) <= budget

    best: dict[int, tuple[int, int]] = {}
    fallback: tuple[int, int] | None = None
    index = min(len(text), pos + budget + 1)
    while index > pos + 1:
        index -= 1
        if not text[index].isspace() or text[index - 1].isspace():
            continue
        end = index
        start = end
        while start < len(text) and text[start].isspace():
            start += 1
        gap = text[end:start]
        if "\n" in gap:
            start = end + gap.rfind("\n") + 1
        if not fits(end) or fences.splits_fence_line(end) or fences.splits_fence_line(start):
            continue
        if gap.count("\n") >= 2 or ("\n" in gap and fences.block_boundary(end, start)):
            rank = _PARAGRAPH
        else:
            rank = _LINE if "\n" in gap else _WORD
        best.setdefault(rank, (end, start))
        fallback = fallback or (end, start)
        if rank == _PARAGRAPH and end - pos >= budget // 2:
            break
    for rank in (_PARAGRAPH, _LINE, _WORD):
        if rank in best and best[rank][0] - pos >= budget // 2:
            return best[rank]
    if fallback:
        return fallback
    return _hard_cut(pos, budget, fences, fits)


def _hard_cut(
    pos: int, budget: int, fences: _FenceMap, fits: Callable[[int], bool]
) -> tuple[int, int]:
    """The longest cut with no whitespace: outside fence lines where possible."""
    candidates = range(pos + budget, pos, -1)
    for end in candidates:
        if fits(end) and not fences.splits_fence_line(end):
            return end, end
    for end in candidates:
        if fits(end):
            return end, end
    return pos + 1, pos + 1
