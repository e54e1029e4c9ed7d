"""Who may approve, answer and stop (issue: "Who may approve, answer and stop").

By default the requester and the configured approvers approve and stop; any
person in the thread may answer. Approvers are listed by platform user id or by
display name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conversations.events import Author
from core.journal import Person


@dataclass(frozen=True)
class AccessPolicy:
    """Rules for deciding; ``approvers`` holds user ids or display names."""

    approvers: frozenset[str] = field(default_factory=frozenset)

    def may_decide(self, who: Author, requester: Person) -> bool:
        """True for the requester and the approvers."""
        return who.id == requester.id or who.id in self.approvers or who.name in self.approvers

    def may_stop(self, who: Author, requester: Person) -> bool:
        """Same people as :meth:`may_decide`."""
        return self.may_decide(who, requester)

    def may_answer(self, who: Author) -> bool:
        """Any person (not a bot) in the thread."""
        return not who.is_bot
