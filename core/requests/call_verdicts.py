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

from core.vocabulary.entries import DecisionEntry
from core.vocabulary.requests import ToolApproval
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.verdicts import Approved, CallsDecided, CallVerdict, Denied


def decided_calls(
    snap: ConversationSnapshot, request: ToolApproval, also: Sequence[DecisionEntry] = ()
) -> dict[int, tuple[CallVerdict, str]]:
    """``{call number: (verdict, name)}`` of the calls of ``request`` decided so far.

    ``also``: decisions of the same change, not in ``snap`` yet (replayed last).
    A call nobody decided is missing.
    """
    entries = [
        r.entry
        for r in snap.journal
        if isinstance(r.entry, DecisionEntry) and r.entry.request_id == request.id
    ]
    numbers = {tool_use_id: n for n, tool_use_id in enumerate(request.tool_use_ids, start=1)}
    decided: dict[int, tuple[CallVerdict, str]] = {}
    for entry in (*entries, *also):
        for number, verdict in _covered(entry, numbers, len(request.tool_use_ids)).items():
            decided.setdefault(number, (verdict, entry.by.name))
    return decided


def _covered(entry: DecisionEntry, numbers: dict[str, int], count: int) -> dict[int, CallVerdict]:
    if isinstance(entry.verdict, CallsDecided):
        return {numbers[i]: v for i, v in entry.verdict.calls.items() if i in numbers}
    verdict: CallVerdict = Approved() if isinstance(entry.verdict, Approved) else Denied()
    chosen = [entry.call] if entry.call is not None else range(1, count + 1)
    return dict.fromkeys(chosen, verdict)
