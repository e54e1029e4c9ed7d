"""Budgets: before each model call, has the conversation or its channel spent enough?

A conversation's budget counts every model call it made; a channel's daily budget
counts the calls of every conversation in the channel since 00:00 UTC (asked of
the bot's :data:`core.run.settings.ChannelSpend`). A budget reached pauses the run
with a continue request (:func:`core.requests.go_on.open_budget`); each approval of
one raises that budget by one more of its size for this conversation
(:func:`core.pricing.raises`), so the raise is recorded in its journal with who
gave it. Only the requester or an approver may decide it (as any decision).
"""

from __future__ import annotations

from datetime import datetime

from core.pricing import Budgets, Reached, journal_spend, raises, reached
from core.run.settings import ChannelSpend
from core.vocabulary.snapshot import ConversationSnapshot


def day_start(now: datetime) -> datetime:
    """00:00 of ``now``'s UTC day (``now`` timezone-aware UTC)."""
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


async def budget_reached(
    snap: ConversationSnapshot,
    budgets: Budgets,
    now: datetime,
    channel_spend: ChannelSpend | None,
) -> Reached | None:
    """The first of ``budgets`` that ``snap``'s conversation has used up, or None.

    Without ``channel_spend`` the channel's daily budget counts this conversation's
    calls of the day only.
    """
    if budgets.conversation:  # the journal is read only when there is a budget
        spent = journal_spend(snap.journal)
        used_up = reached("conversation", budgets.conversation, spent, raises(snap, "conversation"))
        if used_up is not None:
            return used_up
    if not budgets.channel_day:
        return None
    since = day_start(now)
    if channel_spend is not None:
        spent = await channel_spend(snap.id, since)
    else:
        spent = journal_spend(snap.journal, since)
    return reached("channel_day", budgets.channel_day, spent, raises(snap, "channel_day", since))
