"""The audit trail's words: how a person acted, and the record of one decision or refused
attempt (docs/architecture.md, "The audit trail").

Every decision a person makes on a pending request (an approval, a rejection, a
tool call allowed or denied, an option picked, an answer, a plan revised in words), every
stop, and every attempt that changed nothing (someone who may not decide, a plan
version replaced meanwhile, a request decided already, a stop after its run ended) is one
:class:`Audited`. A change that records a decision carries it (``Change.audit``), so
the store writes it in the decision's own transaction; a refused attempt that commits
nothing is recorded by the hub with the notice that answers it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Means = Literal["reaction", "button", "reply", "command", "native_stop", "inspector"]
"""How a person acted, as the chat platform's adapter said: a reaction on the bot's
message, a button under it, a reply in the thread, a command (``/stop``, ``/approve``;
the console's ``+✅ N.K`` is a reaction), or the platform's own stop control (Slack's
stop button on a thread's agent session, ``agent_session_stopped``), or an operator's
action in the run inspector's pages (``inspector``)."""

Outcome = Literal[
    "approved",
    "rejected",
    "allowed",
    "denied",
    "chose",
    "answered",
    "revised",
    "stopped",
    "refused",
    "revoked",
    "signed_in",
    "signed_out",
    "forked",
]
"""What the attempt did: a decision's verdict (``allowed`` / ``denied`` for the calls of a
tool approval, ``chose`` for a question's option), ``stopped`` for a stop that ended its
run, ``refused`` for anything that changed nothing (the reason says why), ``revoked``
for a remembered approval an operator revoked (:data:`RULE`); ``signed_in`` /
``signed_out`` for an operator's session of the run inspector (:data:`SIGN_IN`) and
``forked`` for a conversation forked from a point of its journal."""

STOP = "stop"
"""The ``request_kind`` of a stop (it is aimed at a run, not at a request)."""
RESTART = "restart"
"""The ``request_kind`` of a message that would start a stopped conversation again."""
RULE = "approval_rule"
"""The ``request_kind`` of an operator's revocation of a remembered approval: its
``request_id`` is the rule's id, its ``user_id`` ``operator:<name>``, its means
``command`` (``threadbot policy revoke``)."""

SIGN_IN = "sign_in"
"""The ``request_kind`` of an operator's sign-in to the run inspector (and sign-out): its
``user_id`` is ``operator:<name>`` (the name given, for a refused one)."""
FORK = "fork"
"""The ``request_kind`` of a fork: its ``request_id`` the journal entry forked at."""

NOT_ALLOWED = "not an approver"
"""Why someone other than the requester or an approver was refused."""


class Audited(BaseModel):
    """One person's decision or refused attempt: ``user_id`` (a platform user id, never a
    display name) acted by ``means`` on the request ``request_id`` of kind
    ``request_kind`` (a :class:`core.vocabulary.requests.RequestKind` value, or
    :data:`STOP`, :data:`RESTART`) at plan version ``version`` (plan approvals and
    revisions; None otherwise), with ``outcome``; ``reason`` says what followed (``run
    resumed``) or why nothing did (``stale version``).

    ``request_kind`` and ``version`` None with a ``request_id``: the store reads them from
    that request when it records the entry (a refusal made before its request was read).
    ``means`` None: the caller did not say (an engine driven directly, as in tests).
    """

    model_config = ConfigDict(frozen=True)

    request_kind: str | None = None
    request_id: str | None = None
    version: int | None = None
    user_id: str
    means: Means | None = None
    outcome: Outcome
    reason: str = ""
