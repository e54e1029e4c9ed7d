"""Reading what threadbot stored before requests and verdicts were typed (migration 0006).

Databases written by earlier versions keep their rows and journal entries as they
are; these readers turn the old shapes into the new ones as they are loaded, so
no data is rewritten (a crash in an upgrade cannot lose it). They are the SQL
store's load edge (:mod:`conversations.store.records`, the journal's load): core's
models know only today's shapes. Each takes the raw mapping a model is validated
from and returns the mapping in today's shape; a mapping in today's shape passes
unchanged. Raises ``ValueError`` for an old decision text it does not know.

What changed:

- a decision was a text: ``"approved"``, ``"rejected"``, ``"denied"`` (each
  perhaps with ``" call N"``), ``"revise"``, ``"answer"``, ``"go on"``; it is a
  :data:`core.vocabulary.verdicts.Verdict` now (:func:`from_label`);
- the "what should change in plan vN?" question was a ``question`` with a plan
  version; it is a ``plan_revision`` now;
- a waiting control call borrowed a tool state (``propose_plan`` sat
  ``pending_approval``, ``ask_user`` sat ``running``); it stays ``approved`` now
  and its request carries the wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.tools import control
from core.vocabulary.verdicts import Answered, Approved, Denied, Rejected, Revised, Verdict

_LABELS: dict[str, Approved | Rejected | Denied | Revised | Answered] = {
    "approved": Approved(),
    "go on": Approved(),
    "rejected": Rejected(),
    "denied": Denied(),
    "revise": Revised(),
    "answer": Answered(),
}
_BORROWED_STATES = frozenset({"pending_approval", "running"})


def from_label(label: str) -> tuple[Verdict, int | None]:
    """A decision stored as text: its verdict and call number (from 1; None for all).

    ``"approved"``, ``"rejected"`` and ``"denied"``, each optionally followed by
    ``" call N"``; ``"revise"``, ``"answer"`` and ``"go on"`` (an approval given in
    words). Raises ``ValueError`` for any other text.
    """
    head, _, number = label.partition(" call ")
    verdict = _LABELS.get(head)
    if verdict is None or (number and not number.isdigit()):
        raise ValueError(f"not a stored decision: {label!r}")
    return verdict, int(number) if number else None


def request(data: Any) -> Any:
    """A pending request stored before 0006 (a ``decision`` text, a plan question), made new."""
    if not isinstance(data, Mapping):
        return data
    fields = dict(data)
    if fields.get("kind") == "question" and fields.get("plan_version") is not None:
        fields["kind"] = "plan_revision"
    label = fields.pop("decision", None)
    if label is not None and fields.get("verdict") is None:
        fields["verdict"], _call = from_label(label)
    return fields


def entry(data: Any) -> Any:
    """A journal entry's body as stored, in today's shape (a decision's is read by
    :func:`decision_entry`; every other kind passes unchanged)."""
    if isinstance(data, Mapping) and data.get("kind") == "decision":
        return decision_entry(data)
    return data


def decision_entry(data: Any) -> Any:
    """A journal decision as stored before 0006 (``decision`` text) in today's shape."""
    if not isinstance(data, Mapping) or "decision" not in data:
        return data
    fields = dict(data)
    verdict, call = from_label(fields.pop("decision"))
    fields.setdefault("verdict", verdict)
    if fields.get("call") is None:
        fields["call"] = call
    return fields


def tool_state(name: str, state: str) -> str:
    """A tool call's state as stored (``state``, of the tool ``name``), in today's terms:
    a waiting control call stored before 0006 in a borrowed state is ``approved``."""
    if control.opens_request(name) and state in _BORROWED_STATES:
        return "approved"
    return state
