"""The pending rows the deliverer knows of: handed over by the commits that wrote them.

A commit that writes outbox rows hands them to the deliverer
(:data:`conversations.store.OutboxListener`, :meth:`Deliverer.wake`), which keeps
them here, per conversation, until they are settled: the dispatcher and the workers
read them here, not from the store, and settling a row (sent, failed, dropped)
writes it and forgets it. On the path of a run's messages the deliverer reads
nothing (docs/architecture.md, "One mention, one approval, one stop").

The store is still read, as a fallback, for what no commit of this process handed
over: rows left pending before a start (read at start), and rows another process
(or a tool) wrote, found by the poll every ``poll_interval`` seconds or when
:meth:`Deliverer.wake` is called without rows. A look (:meth:`KnownRows.look`)
lists the conversations with pending rows in the store; each is then *unsure*: its
worker reads its rows from the store once (merged with those handed over), and it is
sure again once a read found every one.

Settled here, kept in memory too: the ids settled lately, so a row handed over late
(a look found it and it went out first) is not sent again; and the requests' messages
posted lately (at most :data:`POSTS_REMEMBERED`), so the edits of a plan's card while
its run goes on (its approval, its steps) read nothing. An edit of a message posted
longer ago reads it from the store, one ``SELECT``
(:mod:`conversations.outbox._closing`), since a conversation waiting on a person holds
no memory (docs/architecture.md, "Durability and exactly-once"): a plan posted is
kilobytes, and thousands may wait, so what is kept is bounded by a count, not by the
conversations waiting.

Several processes on one database: only the holder of a conversation's delivery
claim sends its rows; a deliverer that takes a claim anew reads that conversation's
rows from the store again (:meth:`KnownRows.refresh`), and one that finds it held
elsewhere forgets them (:meth:`KnownRows.forget_conversation`; docs/architecture.md,
"Several instances").
"""

from __future__ import annotations

import contextlib
import math
from collections import OrderedDict
from collections.abc import Collection, Iterator, Sequence

from conversations.events import PostReply
from conversations.outbox._marks import HeldMarks
from conversations.store import (
    Outbox,
    OutboxRecord,
    Outgoing,
    PendingSend,
    RequestMessage,
)
from conversations.store.claims import Claim, holding

CALM = frozenset({"note", "plan_steps"})
"""Purposes of rows that may wait for their interval: no reason to take a conversation
up sooner (notes, and a plan's steps: :mod:`conversations.plan_cards`)."""
REQUEST_POST = "milestone"
"""``purpose`` of a request's own post (its message is the one the closing edit edits)."""
REPORT = "report"
"""``purpose`` of a failure report: it goes before the conversation's other rows."""
REMEMBERED = 64
"""Settled ids kept at most (the oldest are forgotten first): a row is handed over
right after its commit, so only a row settled moments ago can come in again."""
POSTS_REMEMBERED = 8
"""Requests' messages kept at most, the least lately used forgotten first: a plan's card
is edited when it is decided and as its steps move, while its run goes on. A plan posted
is kilobytes (about 7 KB in benchmark 6): 8 of them are a fixed 50-odd KB however many
conversations wait, where 32 showed as 0.4 KiB more per waiting conversation among 500."""


class KnownRows:
    """The pending rows this deliverer knows of, per conversation, over the store.

    Its reads (:meth:`conversations`, :meth:`pending_rows`, :meth:`still_pending`,
    :meth:`has_pending_milestone`) answer from memory for every conversation that is
    not unsure; its writes go to the store (``outbox``) and update the memory.
    ``fed``: rows were handed over at least once (the store tells this deliverer
    what it writes: a drain need not look at the store); ``more``: the store may
    hold pending rows no look listed (the last look was cut at its limit, or this
    deliverer, never fed, wrote a report): look again once the known ones are done.
    Errors: what the store raises.
    """

    def __init__(self, outbox: Outbox, hold_marks: float = 1.0) -> None:
        self.store = outbox
        self.fed = False
        self.more = False
        self._rows: dict[str, dict[int, PendingSend]] = {}
        """Pending rows by conversation, the conversations in the order their first row
        came in; a conversation with none left is removed."""
        self._where: dict[int, str] = {}
        """The conversation of each pending row in ``_rows``, by id."""
        self._unsure: dict[str, tuple[int, bool]] = {}
        """Conversations a look found pending in the store: (place in the look, milestone)."""
        self._settled: OrderedDict[int, None] = OrderedDict()
        self._posts: OrderedDict[tuple[str, str], RequestMessage] = OrderedDict()
        """Requests' messages this deliverer posted lately, by (conversation, request)."""
        self.held = HeldMarks(hold_marks)
        """The marks of sends held back for the conversation's next (:meth:`mark_sent`
        ``later``, :mod:`conversations.outbox._marks`)."""

    # --- what comes in ------------------------------------------------------------------

    def take(self, records: Sequence[OutboxRecord]) -> None:
        """Rows a commit wrote: pending ones are queued, others (dropped) forgotten."""
        self.fed = True
        for record in records:
            if record.state == "pending" and record.id not in self._settled:
                rows = self._rows.setdefault(record.conversation_id, {})
                rows[record.id] = record.pending_send()
                self._where[record.id] = record.conversation_id
            else:
                self._forget([record.id], record.conversation_id)

    async def look(self, limit: int) -> None:
        """Read which conversations have pending rows in the store (up to ``limit``): each
        becomes unsure, its rows read from the store by its next worker."""
        found = await self.store.pending_conversations(limit)
        self._unsure = {cid: (n, milestone) for n, (cid, milestone) in enumerate(found)}
        self.more = len(found) >= limit

    def forget_conversation(self, conversation_id: str) -> None:
        """Forget what is known of the conversation's pending rows: another process
        delivers it (:mod:`conversations.outbox._claims`)."""
        for row_id in self._rows.pop(conversation_id, {}):
            self._where.pop(row_id, None)
        self._unsure.pop(conversation_id, None)
        for key in [key for key in self._posts if key[0] == conversation_id]:
            del self._posts[key]  # the other process may post it again
        held, _at = self.held.take(conversation_id)
        for row_id in held:  # not marked: the other process sends them again, or we do
            self._settled.pop(row_id, None)  # once the claim comes back

    def refresh(self, conversation_id: str) -> None:
        """Read the conversation's pending rows from the store again at its next read (its
        delivery claim was taken anew: another process may have sent some meanwhile)."""
        self.forget_conversation(conversation_id)
        self._unsure[conversation_id] = (-1, True)

    # --- reads, from memory ---------------------------------------------------------------

    def conversations(self) -> Iterator[tuple[str, bool]]:
        """Conversations with pending rows, lazily, in the order their first pending row
        came in (the oldest row first: commits hand rows over in the order they were
        written), then the unsure ones no row was handed for, in the look's order:
        ``(id, whether a row other than a note or an edit of a plan's steps is pending)``
        (a plan's edit waits for its interval like notes; for an unsure one, as
        the look found it). Costs what the caller takes, not every conversation: a
        busy deliverer asks after every send."""
        for cid, rows in self._rows.items():
            unsure = self._unsure.get(cid)
            milestone = unsure is not None and unsure[1]
            yield cid, milestone or any(row.purpose not in CALM for row in rows.values())
        for cid, (_place, milestone) in sorted(self._unsure.items(), key=lambda i: i[1][0]):
            if cid not in self._rows:
                yield cid, milestone

    def pending(self, conversation_id: str) -> bool:
        """Whether the conversation has pending rows known, or is unsure."""
        return conversation_id in self._rows or conversation_id in self._unsure

    def empty(self) -> bool:
        """Whether no pending row is known, nor any conversation unsure."""
        return not self._unsure and not self._rows

    async def pending_rows(
        self, conversation_id: str, *, after: int = 0, limit: int = 100
    ) -> list[PendingSend]:
        """Up to ``limit`` pending rows of the conversation with ids above ``after``, in
        its order: reports first, then the others oldest first (as
        :meth:`conversations.store.Outbox.pending_rows`). From memory, or, for an
        unsure conversation, from the store (what it finds is kept)."""
        known = self._rows.get(conversation_id, {})
        if conversation_id in self._unsure:
            page = await self.store.pending_rows(conversation_id, after=after, limit=limit)
            for row in page:
                if row.id not in self._settled:
                    known = self._rows.setdefault(conversation_id, {})
                    known.setdefault(row.id, row)
                    self._where[row.id] = conversation_id
            if len(page) < limit:
                self._unsure.pop(conversation_id, None)  # every pending row is known now
        rows = sorted(
            (row for row in known.values() if row.id > after),
            key=lambda row: (row.purpose != REPORT, row.id),
        )
        return rows[: max(0, limit)]

    async def has_pending_milestone(self, conversation_id: str, *, after: int) -> bool:
        """Whether a pending row other than a note, with an id above ``after``, waits."""
        if conversation_id in self._unsure:
            return await self.store.has_pending_milestone(conversation_id, after=after)
        rows = self._rows.get(conversation_id, {}).values()
        return any(row.id > after and row.purpose != "note" for row in rows)

    async def still_pending(self, ids: Collection[int]) -> set[int]:
        """Which of ``ids`` are pending still (not settled, nor dropped by a stop)."""
        return {i for i in ids if i in self._rows.get(self._where.get(i, ""), ())}

    async def request_message(self, conversation_id: str, request_id: str) -> RequestMessage | None:
        """The message request ``request_id`` was posted as: as this deliverer sent it
        lately, else as the store says (:meth:`conversations.store.Outbox.request_message`)."""
        key = (conversation_id, request_id)
        if (posted := self._posts.get(key)) is not None:
            self._posts.move_to_end(key)
            return posted
        return await self.store.request_message(conversation_id, request_id)

    # --- writes, to the store -----------------------------------------------------------

    async def mark_sent(
        self,
        rows: Sequence[PendingSend],
        message_id: str | None,
        *,
        later: bool = False,
        now: float = 0.0,
    ) -> None:
        """``rows`` (of one conversation) went out as ``message_id``: written (nothing read),
        then forgotten, with the conversation's marks held back before them (one write).

        ``later``: sending them twice changes nothing (a session status, an edit of a
        request's message: :func:`conversations.outbox._attempt.harmless_again`), so
        their mark is held back (``now``: the clock's time) in :attr:`held`, to go with
        the conversation's next one, or alone (:meth:`mark_held`): forgotten here at
        once, written then.
        """
        conversation_id = rows[0].conversation_id
        if later:
            self.held.hold(rows, message_id, now)
            self._settle(rows)
            return
        held, at = self.held.take(conversation_id)
        earlier = {row_id: mid for row_id, (_row, mid) in held.items()}
        every, ids = [*rows, *(row for row, _mid in held.values())], [r.id for r in rows]
        try:
            await self.store.mark_sent(ids, message_id, rows=every, earlier=earlier)
        except BaseException:
            self.held.put_back(conversation_id, held, at)  # still to be written
            raise
        self._settle(rows)
        if message_id is not None:
            for row in rows:
                self._posted(row, message_id)

    async def mark_held(self, conversation_id: str, under: Claim | None = None) -> None:
        """Write the marks held back for the conversation, in one write, fenced by its
        delivery claim ``under`` (the one held now; a claim is renewed at a new epoch);
        nothing when none is held. Raises
        :class:`~conversations.store.claims.ClaimLost` when another process took it."""
        held, at = self.held.take(conversation_id)
        if not held:
            return
        earlier = {row_id: mid for row_id, (_row, mid) in held.items()}
        rows = [row for row, _mid in held.values()]
        try:
            with holding(under) if under is not None else contextlib.nullcontext():
                await self.store.mark_sent([], None, rows=rows, earlier=earlier)
        except BaseException:
            self.held.put_back(conversation_id, held, at)
            raise

    async def settle_unsent(self, rows: Sequence[PendingSend], reason: str) -> None:
        """``rows`` had nothing to send: ``dropped`` with ``reason``, then forgotten."""
        await self.store.settle_unsent([row.id for row in rows], reason)
        self._settle(rows)

    async def record_failure(self, send_id: int, error: str) -> int:
        """Count a failed attempt of row ``send_id`` in the store; the attempts so far."""
        return await self.store.record_failure(send_id, error)

    async def fail_for_good(
        self, rows: Sequence[PendingSend], error: str, report: Outgoing | None
    ) -> bool:
        """``rows`` (of one conversation) failed for good, ``report`` written with them (the
        store hands it over as a new row); then they are forgotten. Whether any was
        still pending."""
        failed = await self.store.fail_for_good(
            rows[0].conversation_id, [row.id for row in rows], error, report
        )
        self._settle(rows)
        if failed and report is not None and not self.fed:
            self.more = True  # the report is not handed to a deliverer nobody feeds
        return failed

    async def has_pending_in(self, platform: str, channel: str, *, up_to: int) -> bool:
        """Whether a pending row of ``platform``'s ``channel``, id up to ``up_to``, waits in
        the store (rows an earlier process may have sent: only the store knows)."""
        return await self.store.has_pending_in(platform, channel, up_to=up_to)

    async def last_outbox_id(self) -> int:
        """The id of the newest row in the store, 0 for none."""
        return await self.store.last_outbox_id()

    # --- bookkeeping ----------------------------------------------------------------------

    def _settle(self, rows: Sequence[PendingSend]) -> None:
        for row in rows:
            self._forget([row.id], row.conversation_id)
            self._settled[row.id] = None
        while len(self._settled) > REMEMBERED:
            self._settled.popitem(last=False)

    def _posted(self, row: PendingSend, message_id: str) -> None:
        """Remember ``row``'s message when it is a request's: its first post, as the store
        gives it (:meth:`conversations.store.Outbox.request_message`: the first post's
        action, the message id of the newest request post linked)."""
        if row.request_id is None or not isinstance(row.action, PostReply):
            return
        key = (row.conversation_id, row.request_id)
        known = self._posts.get(key)
        if known is None:
            self._posts[key] = RequestMessage(row.action, "sent", message_id)
        elif row.purpose == REQUEST_POST:
            self._posts[key] = RequestMessage(known.action, "sent", message_id)
        self._posts.move_to_end(key)
        while len(self._posts) > POSTS_REMEMBERED:
            self._posts.popitem(last=False)

    def _forget(self, ids: Collection[int], conversation_id: str) -> None:
        rows = self._rows.get(conversation_id)
        if rows is None:
            return
        for i in ids:
            if rows.pop(i, None) is not None:
                self._where.pop(i, None)
        if not rows:
            del self._rows[conversation_id]


class Looks:
    """When the deliverer looks at the store for pending rows no commit handed over (the
    fallback): when asked to (:meth:`ask`: at start, or woken without rows), every
    ``poll`` seconds, or when the last look was cut at its limit and the conversations
    it listed are done (``rest``)."""

    def __init__(self, poll: float) -> None:
        self.poll = poll
        self._asked, self._made, self._at = 1, 0, -math.inf  # the first look: at start

    def ask(self) -> None:
        """Ask for a look at once."""
        self._asked += 1

    def due(self, now: float, *, rest: bool = False) -> bool:
        """Whether a look is due at ``now`` (clock seconds)."""
        return self._asked > self._made or rest or now >= self._at + self.poll

    def next(self) -> float:
        """When the next look falls due by the clock alone."""
        return self._at + self.poll

    async def look(self, known: KnownRows, limit: int, now: float) -> None:
        """Look (:meth:`KnownRows.look`, up to ``limit`` conversations), at ``now``."""
        asked, self._at = self._asked, now
        await known.look(limit)
        self._made = asked
