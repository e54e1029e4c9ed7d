"""Who decided each call of a tool approval, and how: the request's decisions replayed.

A tool approval is decided by one or more journal decisions
(:class:`core.vocabulary.entries.DecisionEntry`): each decides one call (its ``call``
number) or every call still undecided. Replaying them in journal order gives,
for each call number, the verdict and the name of the person who gave it. A
decision written since 0006 names its calls (``CallsDecided``, keyed by
``tool_use_id``); one written before says ``approved`` or ``denied`` with its
call number (:mod:`conversations.store.legacy`), and is replayed by that number.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from core.policy.remembered import first_covering
from core.vocabulary.approvals import ApprovalScope, CallPattern
from core.vocabulary.entries import DecisionEntry
from core.vocabulary.requests import ToolApproval
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Approved, CallsDecided, CallVerdict, Denied


class Decided(NamedTuple):
    """How one call was decided: the verdict, the name of who gave it, and, for an
    approval wider than once, its scope and the remembered pattern that covers the call."""

    verdict: CallVerdict
    name: str
    scope: ApprovalScope | None = None
    pattern: CallPattern | None = None


def decided_calls(
    snap: ConversationSnapshot, request: ToolApproval, also: Sequence[DecisionEntry] = ()
) -> dict[int, Decided]:
    """``{call number: Decided}`` of the calls of ``request`` decided so far.

    ``also``: decisions of the same change, not in ``snap`` yet (replayed last).
    A call nobody decided is missing.
    """
    entries = [
        r.entry
        for r in snap.journal
        if isinstance(r.entry, DecisionEntry) and r.entry.request_id == request.id
    ]
    numbers = {tool_use_id: n for n, tool_use_id in enumerate(request.tool_use_ids, start=1)}
    decided: dict[int, Decided] = {}
    for entry in (*entries, *also):
        for number, verdict in _covered(entry, numbers, len(request.tool_use_ids)).items():
            if number not in decided:
                decided[number] = _how(snap, request, number, verdict, entry)
    return decided


def _how(
    snap: ConversationSnapshot,
    request: ToolApproval,
    number: int,
    verdict: CallVerdict,
    entry: DecisionEntry,
) -> Decided:
    """Call ``number``'s decision by ``entry``, with its scope when wider than once."""
    if entry.scope is None or entry.scope is ApprovalScope.ONCE or not entry.patterns:
        return Decided(verdict, entry.by.name)
    record = snap.tool_calls.get(request.tool_use_ids[number - 1])
    covering = None
    if record is not None:
        covering = first_covering(entry.patterns, record.name, record.input)
    return Decided(verdict, entry.by.name, entry.scope, covering or entry.patterns[0])


def _covered(entry: DecisionEntry, numbers: dict[str, int], count: int) -> dict[int, CallVerdict]:
    if isinstance(entry.verdict, CallsDecided):
        return {numbers[i]: v for i, v in entry.verdict.calls.items() if i in numbers}
    verdict: CallVerdict = Approved() if isinstance(entry.verdict, Approved) else Denied()
    chosen = [entry.call] if entry.call is not None else range(1, count + 1)
    return dict.fromkeys(chosen, verdict)
