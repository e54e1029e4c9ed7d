"""The snapshot: all a run reads of one conversation, loaded in one transaction.

A run loads it once and folds its own commits into it (:mod:`core.vocabulary.fold`);
a run that waited for a person and a run that crashed resume from it on the same path
(docs/architecture.md, "Durability and exactly-once").
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from core.vocabulary.entries import JournalRecord, UserText
from core.vocabulary.lifecycle import Status
from core.vocabulary.people import Person
from core.vocabulary.requests import PendingRequest, RequestState
from core.vocabulary.tool_records import ToolCallRecord


class ConversationSnapshot(BaseModel):
    """All a run reads of one conversation."""

    model_config = ConfigDict(frozen=True)

    id: str
    requester: Person
    status: Status
    position: str
    plan_version: int
    workspace: str
    """Directory the conversation's file and command tools are confined to."""
    journal: tuple[JournalRecord, ...]
    tool_calls: dict[str, ToolCallRecord]
    requests: tuple[PendingRequest, ...]
    """Every request of the conversation, oldest first."""

    @property
    def open_requests(self) -> tuple[PendingRequest, ...]:
        """The requests still waiting for a person."""
        return tuple(r for r in self.requests if r.state is RequestState.OPEN)

    @property
    def last_seq(self) -> int:
        """``seq`` of the newest journal entry, 0 for an empty journal."""
        return self.journal[-1].seq if self.journal else 0

    @property
    def run(self) -> int:
        """The conversation's newest run, named by the ``seq`` of the request that began
        it (0: none yet). A run goes on through its waits for a person and ends
        ``done``, ``failed`` or ``cancelled``; the next request begins the next one, so
        a stop aimed at one run never ends a later one (docs/architecture.md, "One
        mention, one approval, one stop")."""
        for record in reversed(self.journal):
            entry = record.entry
            if isinstance(entry, UserText) and entry.role == "request":
                return record.seq
        return 0
