"""Feedback in memory (see :mod:`conversations.store.sql.feedback` for the rules)."""

from __future__ import annotations

from conversations.store.feedback import FeedbackCounts, FeedbackGiven
from conversations.store.memory._tables import Tables, checkpoint


class MemoryFeedback:
    """:class:`conversations.store.feedback.Feedback` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def give(self, conversation_id: str, user_id: str, *, positive: bool) -> FeedbackGiven:
        """Record ``user_id``'s feedback, replacing theirs; raises
        :class:`core.vocabulary.errors.ConversationNotFound`."""
        await checkpoint()
        self._t.conversation(conversation_id)
        given = FeedbackGiven(conversation_id, user_id, positive, self._t.clock())
        self._t.feedback[(conversation_id, user_id)] = given
        return given

    async def of(self, conversation_id: str) -> list[FeedbackGiven]:
        """The conversation's feedback, one per person, oldest first."""
        await checkpoint()
        found = [f for f in self._t.feedback.values() if f.conversation_id == conversation_id]
        return sorted(found, key=lambda f: (f.at, f.user_id))

    async def counts(self) -> dict[str, FeedbackCounts]:
        """👍 and 👎 counts of every conversation with feedback."""
        await checkpoint()
        counts: dict[str, FeedbackCounts] = {}
        for f in self._t.feedback.values():
            was = counts.get(f.conversation_id, FeedbackCounts())
            counts[f.conversation_id] = FeedbackCounts(
                was.positive + f.positive, was.negative + (not f.positive)
            )
        return counts
