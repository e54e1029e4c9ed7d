"""The ``Feedback`` interface of the store: people's 👍 / 👎 on a conversation's answers.

One row per (conversation, person): the person's latest feedback and when it was
given; a later press by the same person replaces their earlier one
(docs/architecture.md, "What a person sees"). Taken by the hub (a feedback button, or a
👍 / 👎 reaction on an answer) and by ``threadbot usage --by conversation``. Who gave it
is a platform user id, never a display name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class FeedbackGiven:
    """One person's feedback on a conversation: ``positive`` (👍) or not (👎), given at
    ``at`` (UTC, the store's clock), by the platform user id ``user_id``."""

    conversation_id: str
    user_id: str
    positive: bool
    at: datetime


@dataclass(frozen=True)
class FeedbackCounts:
    """How many people's latest feedback on a conversation is 👍 and how many 👎."""

    positive: int = 0
    negative: int = 0


class Feedback(Protocol):
    """People's feedback on conversations (the ``feedback`` table)."""

    async def give(self, conversation_id: str, user_id: str, *, positive: bool) -> FeedbackGiven:
        """Record ``user_id``'s feedback on ``conversation_id``, replacing theirs if any;
        the row as stored. Raises :class:`core.vocabulary.errors.ConversationNotFound`."""
        ...

    async def of(self, conversation_id: str) -> list[FeedbackGiven]:
        """The conversation's feedback, one per person, oldest first."""
        ...

    async def counts(self) -> dict[str, FeedbackCounts]:
        """The counts of every conversation that has feedback, by conversation id."""
        ...
