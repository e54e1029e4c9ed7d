"""The journal's other entries on the timeline, each as a :class:`Note`: a title, a text,
facts and, where a person or a model call is in it, who and what it cost.

Workflow states (the workflow chosen, each position entered), compactions, context
strategies' notes, nested scopes entered and left, retried attempts, approvals by a
remembered rule, escalations and the resets of the failure streak, nudges, expert
consultations and delegations (docs/architecture.md, "The agent as a composition"),
and where a fork came from (docs/architecture.md, "Rewind and fork").
"""

from __future__ import annotations

from collections.abc import Callable

from conversations.inspect.items import Note
from conversations.inspect.turns import arguments, spent
from core.vocabulary.approvals import CallPattern, RuleApplied
from core.vocabulary.entries import (
    Compacted,
    ContextNote,
    Delegated,
    DelegationBrief,
    DelegationChecked,
    DelegationEnded,
    Entry,
    Escalated,
    ExpertConsulted,
    FailedCall,
    FailuresReset,
    ForkedFrom,
    JournalRecord,
    Nudged,
    ScopeEntered,
    ScopeLeft,
    StepEntered,
    ToolAttempt,
    WorkflowChosen,
)

Facts = tuple[tuple[str, str], ...]


def note(record: JournalRecord, tool_of: Callable[[str], str]) -> Note | None:
    """The item of ``record``'s entry, or None for a kind this module does not show
    (messages, turns, results, decisions and stops have items of their own).
    ``tool_of``: the tool a ``tool_use_id`` asked for."""
    entry = record.entry
    made = _made(entry, tool_of)
    if made is None:
        return None
    title, text, facts = made
    who = entry.by.id if isinstance(entry, FailuresReset | RuleApplied) else None
    if isinstance(entry, ForkedFrom):
        who = f"operator:{entry.by}"
    usage = entry.usage if isinstance(entry, Compacted | ExpertConsulted) else None
    return Note(
        seq=record.seq,
        at=record.at,
        entry=entry.kind,
        title=title,
        text=text,
        facts=facts,
        who=who,
        spent=spent(usage),
    )


def _made(entry: Entry, tool_of: Callable[[str], str]) -> tuple[str, str, Facts] | None:
    """``(title, text, facts)`` of ``entry``; None for a kind shown elsewhere."""
    match entry:
        case WorkflowChosen():
            facts: Facts = (("check command", entry.check_command),) if entry.check_command else ()
            return f"Workflow {entry.name}", "", facts
        case StepEntered():
            return f"Entered {entry.position}", entry.instructions, ()
        case Compacted():
            facts = (("summarizes up to", f"#{entry.through_seq}"),)
            if entry.dropped:
                facts += (("notes left out", ", ".join(f"#{s}" for s in entry.dropped)),)
            return "Compacted", entry.summary, facts
        case ContextNote():
            facts = (("strategy", entry.strategy), ("scope", entry.scope))
            if entry.lifetime_turns is not None:
                facts += (("holds for", f"{entry.lifetime_turns} model turns"),)
            if entry.task is not None:
                facts += (("task", entry.task),)
            return "Context note", entry.text, facts
        case ScopeEntered():
            facts = (("inside", entry.parent),) + ((("role", entry.role),) if entry.role else ())
            return f"Scope {entry.scope} entered", entry.task, facts
        case ScopeLeft():
            return f"Scope {entry.scope} left", entry.outcome, ()
        case ToolAttempt():
            facts = (("call", entry.tool_use_id), ("retried after", f"{entry.delay_seconds:g} s"))
            title = f"Attempt {entry.attempt} of {tool_of(entry.tool_use_id)} failed"
            return title, entry.error, facts
        case RuleApplied():
            facts = (
                ("call", entry.tool_use_id),
                ("rule", f"#{entry.rule_id} ({entry.scope.value})"),
                ("covers", _pattern(entry.pattern)),
            )
            return f"{tool_of(entry.tool_use_id)} approved by a remembered rule", "", facts
        case Escalated():
            facts = (("request", entry.request_id), ("to", entry.to))
            return "Escalated: stuck", entry.reason or _failures(entry.failures), facts
        case FailuresReset():
            return "Failure streak reset", "", (("request", entry.request_id),)
        case Nudged():
            facts = (("call", entry.tool_use_id),) if entry.tool_use_id else ()
            return f"Nudged ({entry.why.replace('_', ' ')})", entry.text, facts
        case ForkedFrom():
            facts = (("conversation", entry.conversation), ("entry", f"#{entry.at}"))
            return f"Forked from entry #{entry.at} of another conversation", "", facts
        case ExpertConsulted():
            facts = (("call", entry.tool_use_id), ("outcome", entry.outcome))
            if entry.reason:
                facts += (("why", entry.reason),)
            return "Expert consulted", entry.question, facts
        case _:
            return _delegation(entry)


def _delegation(entry: Entry) -> tuple[str, str, Facts] | None:
    """``(title, text, facts)`` of a delegation's entries; None for any other kind."""
    match entry:
        case Delegated():
            facts: Facts = (("model", entry.model),)
            if entry.branch:
                facts += (("branch", entry.branch),)
            text = entry.reason or _failures(entry.failures)
            return f"Delegated to the expert (#{entry.n})", text, facts
        case DelegationBrief():
            return f"Delegation #{entry.n}: the expert's brief", entry.text, ()
        case DelegationChecked():
            facts = (("command", entry.command), ("passed", "yes" if entry.passed else "no"))
            return f"Delegation #{entry.n} checked", entry.output, facts
        case DelegationEnded():
            facts = (("outcome", entry.outcome.replace("_", " ")),)
            if entry.why:
                facts += (("why", entry.why),)
            return f"Delegation #{entry.n} ended", entry.summary, facts
    return None


def _failures(failures: tuple[FailedCall, ...]) -> str:
    """The failed calls of a streak, one paragraph each: the tool and call, then its output."""
    return "\n\n".join(f"{f.tool}: {f.call}\n{f.output}" for f in failures)


def _pattern(pattern: CallPattern) -> str:
    """The calls a remembered rule covers, in a line."""
    if pattern.command_prefix is not None:
        return f"{pattern.tool} commands starting {pattern.command_prefix!r}"
    return f"{pattern.tool} {arguments(pattern.arguments or {})}"
