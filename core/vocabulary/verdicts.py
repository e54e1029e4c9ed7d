"""What a person decided: verdicts as a tagged union, keyed by call for tool approvals.

The shape is pydantic-ai's ``_deferred.py``: small frozen models, each with a
``kind`` literal, joined by a discriminator; a tool approval's verdicts are a map
from ``tool_use_id`` to :data:`CallVerdict`. Serialise with :data:`verdict_adapter`
(``{"kind": "approved"}``, ``{"kind": "calls_decided", "calls": {"toolu_1":
{"kind": "denied"}}}``).

Which verdicts each request takes (:mod:`core.vocabulary.requests`):

- plan approval: :class:`Approved`, :class:`Rejected`, or :class:`Revised` (the
  plan was answered in words: a change was asked for);
- plan revision: :class:`Revised`; question: :class:`Answered`;
- tool approval: :class:`CallsDecided` once every call is decided;
- go on (turn cap, retry): :class:`Approved` (go on) or :class:`Rejected` (stop here).

A journal decision names one person's verdict on one request
(:class:`core.vocabulary.entries.DecisionEntry`): :class:`Approved` or :class:`Rejected`,
or :class:`CallsDecided` with the calls it decided. Requests and decisions stored
before these types were strings (``"approved call 2"``, ``"revise"``, ``"go on"``):
the store reads them at its load edge (:mod:`conversations.store.legacy`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Verdict(BaseModel):
    model_config = ConfigDict(frozen=True)


class Approved(_Verdict):
    """Yes: the plan is approved, the call may run, the run goes on."""

    kind: Literal["approved"] = "approved"


class Rejected(_Verdict):
    """No: the plan is rejected (what should change?), or the run stops here."""

    kind: Literal["rejected"] = "rejected"


class Denied(_Verdict):
    """A tool call may not run; the model is told so in its result."""

    kind: Literal["denied"] = "denied"


class Revised(_Verdict):
    """A change to the plan was asked for in words (the next version follows)."""

    kind: Literal["revised"] = "revised"


class Answered(_Verdict):
    """A question was answered in words (the words are in the journal)."""

    kind: Literal["answered"] = "answered"


CallVerdict = Annotated[Approved | Denied, Field(discriminator="kind")]
"""The verdict on one tool call."""


class CallsDecided(_Verdict):
    """Verdicts on the calls of a tool approval, keyed by ``tool_use_id``."""

    kind: Literal["calls_decided"] = "calls_decided"
    calls: dict[str, CallVerdict] = Field(default_factory=dict)


Verdict = Annotated[
    Approved | Rejected | Denied | Revised | Answered | CallsDecided,
    Field(discriminator="kind"),
]
"""Any verdict; ``kind`` tells which."""

verdict_adapter: TypeAdapter[Verdict] = TypeAdapter(Verdict)
"""Validates and dumps :data:`Verdict` (``dump_python(v, mode="json")`` for a JSON column)."""
