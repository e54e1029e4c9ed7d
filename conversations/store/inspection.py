"""The ``Inspection`` interface of the store: the run inspector's list of conversations.

One :class:`ConversationSummary` per conversation, newest first, filtered and searched,
a page at a time (keyset paging: a :class:`Cursor` names the last row of a page, and
the next page starts after it, so a page costs the same however deep it is). Read by
the inspector's list page, ``GET /inspector/`` (docs/architecture.md, "The run
inspector"); every backend answers alike (``tests/test_inspection_store.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from core.run.fork import copied_through
from core.vocabulary.entries import JournalRecord, ModelUsage, PricedEntry
from core.vocabulary.lifecycle import ENDED, Lifecycle, Status

PAGE_SIZE = 50
"""Rows on a page unless asked otherwise."""

MAX_PAGE_SIZE = 100
"""The most rows a page holds."""

REQUEST_CHARS = 200
"""How much of a conversation's first request a summary carries (characters)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CURSOR = re.compile(r"(\d{1,20})\.([0-9A-Za-z_-]{1,64})")


@dataclass(frozen=True)
class Cursor:
    """Where a page ended: its last row's ``started`` (UTC) and ``id``; the next page holds
    the rows before it in the list's order (``started`` then ``id``, both descending)."""

    started: datetime
    id: str

    def token(self) -> str:
        """The cursor as a URL-safe text: ``<microseconds since 1970 UTC>.<id>``."""
        micros = (self.started - _EPOCH) // timedelta(microseconds=1)
        return f"{micros}.{self.id}"

    @classmethod
    def parse(cls, token: str) -> Cursor:
        """The cursor :meth:`token` gave; raises :class:`ValueError` for any other text."""
        found = _CURSOR.fullmatch(token)
        if found is None:
            raise ValueError(f"not a page cursor: {token[:80]!r}")
        started = _EPOCH + timedelta(microseconds=int(found[1]))
        return cls(started=started, id=found[2])


@dataclass(frozen=True)
class ConversationFilter:
    """Which conversations a page lists; each field only when given (None, or an empty
    ``text``, lets everything through), all of them together.

    - ``platform``: ``slack``, ``discord``, ``console``;
    - ``workspace``: the Slack team or Discord guild id;
    - ``channel``: a channel id, matching the conversation's channel or, for a Discord
      thread (a channel of its own), the channel it was started in;
    - ``lifecycle``: the status (``waiting`` whatever it waits for);
    - ``requester``: the platform user id of whoever started it (never a display name);
    - ``workflow``: the name of the workflow it runs (:attr:`ConversationSummary.workflow`);
    - ``text``: searched, case-insensitively (ASCII letters at least: SQLite's ``lower``),
      as a part of the conversation's id or of its first request's text (its first
      ``user_text`` journal entry, the words the conversation was opened with; later
      requests, answers, notes and the bot's own texts are not searched).
    """

    platform: str | None = None
    workspace: str | None = None
    channel: str | None = None
    lifecycle: Lifecycle | None = None
    requester: str | None = None
    workflow: str | None = None
    text: str | None = None

    @property
    def search(self) -> str | None:
        """The search text without its surrounding blanks; None when there is none."""
        text = (self.text or "").strip()
        return text or None


def like_pattern(text: str) -> str:
    """``text`` as a ``LIKE`` pattern matching it anywhere, its ``%``, ``_`` and ``\\``
    escaped with ``\\`` (the escape character the SQL store names)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@dataclass(frozen=True)
class ConversationSummary:
    """One conversation as the list shows it.

    The place: ``platform``, ``workspace`` (Slack team, Discord guild; empty for the
    console), ``channel`` and ``thread`` as bound, ``home`` the channel whose settings
    apply (a Discord thread's parent). ``requester_id`` is the platform user id;
    ``requester_name`` the display name stored with it, for reading only. ``status``:
    the lifecycle and what it waits for; ``position``: the workflow's current state
    (``planning``, ``fix``, ``review/check``); ``workflow``: the name of the workflow it
    runs, journaled once with its first request (``WorkflowChosen``; None: none yet, an
    ``idle`` conversation, or one journaled before workflows, which runs ``default``).
    ``request``: the first :data:`REQUEST_CHARS` characters of its first ``user_text``
    entry, the words it was opened with ("" before they are journaled);
    ``request_cut``: it had more (one character past them is read to tell).
    ``started``: when it was opened (UTC; a fork's, when it was forked); ``ended``: its
    last change, when its status ended a run (``done``, ``failed``, ``cancelled``), else
    None. The model calls it made (a fork's own: not those of the entries it copied):
    ``model_calls`` in number, ``tokens`` of every kind, ``cost_micro_usd`` the sum of
    the priced calls' costs in micro-dollars (:func:`priced`: None when it made calls
    and none had a price; 0 with no call) and ``unpriced_calls`` how many had no price.
    A conversation's page shows the same figures, read the same way
    (:func:`ran`, :func:`own_usages`, :func:`priced`).
    """

    id: str
    platform: str
    workspace: str
    channel: str
    home: str
    thread: str
    requester_id: str
    requester_name: str
    status: Status
    position: str
    workflow: str | None
    request: str
    started: datetime
    ended: datetime | None
    model_calls: int
    tokens: int
    cost_micro_usd: int | None
    unpriced_calls: int
    request_cut: bool = False

    def duration(self, now: datetime) -> timedelta:
        """How long it ran (:func:`ran`)."""
        return ran(self.started, self.ended, now) or timedelta(0)


def ended_at(status: Status, changed: datetime | None) -> datetime | None:
    """``changed`` (a conversation's last change) when ``status`` ended a run, else None."""
    return changed if status.lifecycle in ENDED else None


def ran(started: datetime | None, ended: datetime | None, now: datetime) -> timedelta | None:
    """How long a conversation ran, as the list and its page say it: from its opening,
    ``started``, to ``ended`` (:func:`ended_at`), or to ``now`` (UTC) while it is idle,
    runs or waits; never negative; None when the opening is not known."""
    if started is None:
        return None
    return max((ended or now) - started, timedelta(0))


def priced(calls: int, unpriced: int, cost: int) -> int | None:
    """The cost in micro-dollars of ``calls`` model calls, ``unpriced`` of them without a
    price, whose priced ones cost ``cost``: None when there were calls and none had a
    price (a cost not known, never $0), else ``cost`` (0 with no call)."""
    return None if calls and unpriced == calls else cost


def own_usages(journal: Sequence[JournalRecord]) -> list[ModelUsage]:
    """The usage of each model call a conversation made, from its ``journal``'s priced
    entries: a fork's own, past the entries it copied from the conversation it was
    forked from (:func:`core.run.fork.copied_through`: those calls are counted there, as
    the ``model_calls`` table holds them once)."""
    copied = copied_through(journal)
    return [
        r.entry.usage
        for r in journal
        if r.seq > copied and isinstance(r.entry, PricedEntry) and r.entry.usage is not None
    ]


@dataclass(frozen=True)
class CallTotals:
    """Model calls summed: how many, their ``tokens`` of every kind, their cost
    (:func:`priced`) and how many had no price."""

    calls: int
    tokens: int
    cost_micro_usd: int | None
    unpriced: int


def call_totals(usages: Iterable[ModelUsage]) -> CallTotals:
    """The totals of ``usages`` (:func:`own_usages`)."""
    calls = tokens = cost = unpriced = 0
    for usage in usages:
        calls += 1
        tokens += usage.total_tokens
        if usage.cost_micro_usd is None:
            unpriced += 1
        else:
            cost += usage.cost_micro_usd
    return CallTotals(calls, tokens, priced(calls, unpriced, cost), unpriced)


@dataclass(frozen=True)
class ConversationPage:
    """A page of the list: its ``rows``, newest first, and the cursor of the next page
    (None on the last one)."""

    rows: list[ConversationSummary]
    next: Cursor | None


def page_size(limit: int) -> int:
    """``limit`` when it is from 1 to :data:`MAX_PAGE_SIZE`; raises :class:`ValueError`
    otherwise."""
    if not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValueError(f"a page holds 1 to {MAX_PAGE_SIZE} rows, not {limit}")
    return limit


class Inspection(Protocol):
    """What the run inspector reads of the store's conversations."""

    async def conversations(
        self,
        where: ConversationFilter | None = None,
        *,
        after: Cursor | None = None,
        limit: int = PAGE_SIZE,
    ) -> ConversationPage:
        """A page of the conversations ``where`` lets through, newest first (by
        ``started``, then by id, both descending), starting after ``after`` (None: the
        first page), at most ``limit`` rows. Raises :class:`ValueError` for a ``limit``
        outside 1 to :data:`MAX_PAGE_SIZE`. The model calls are read for the page's
        conversations only, so a page costs the same with 10 or 10,000 conversations
        stored (``make bench``, benchmark 11)."""
        ...
