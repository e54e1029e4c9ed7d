"""Scopes: where a part of a run keeps its context, cache and retry strategies; they nest.

A run works in its root scope (``run``), whose strategies come from the
conversation's settings and the engine (:meth:`Scope.root`): the context strategy
(what the model is told besides the conversation, :mod:`core.contexts`), the cache
of large tool outputs (:mod:`core.outputs`) and the retry policy of tool calls safe
to repeat (:mod:`core.retry`). A composed step may go on in a scope nested in the
current one for a task (:class:`core.run.steps.InScope`); the child names its own
strategies or takes its parent's (docs/architecture.md, "The agent as a
composition").

A scope may also say who works in it and where: the role whose model its calls ask
(``role``; None: the workflow position's), the folder its tool calls run in
(``workspace``; None: the conversation's) and whether a ``finish`` hands the work
back to the scope's caller instead of ending the run (``hands_back``). A delegation
to the expert is such a scope (:mod:`core.run.delegation`).

A nested scope is journaled when entered and when left
(:class:`core.vocabulary.entries.ScopeEntered`, :class:`~core.vocabulary.entries.ScopeLeft`),
so a run killed inside one, or one that waited for a person there, finds it open
again: :func:`open_scopes` and :func:`turns_in_scope` read the journal, nothing is
kept in memory alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from core.contexts import ContextStrategy, Flat, context_strategy
from core.outputs import OutputCache
from core.retry import NoRetry, RetryPolicy, retry_policy
from core.run.settings import EngineSettings
from core.vocabulary.entries import (
    AssistantTurn,
    JournalRecord,
    ModelRole,
    ScopeEntered,
    ScopeLeft,
    UserText,
)
from core.workflows.model import Header

ROOT = "run"
"""The id of a run's root scope."""


class Inherit:
    """The marker of a strategy a child scope takes from its parent (:data:`INHERIT`)."""

    def __repr__(self) -> str:
        return "INHERIT"


INHERIT = Inherit()
"""A child scope's strategy that is its parent's (None is a strategy: no cache)."""


@dataclass(frozen=True, kw_only=True)
class Scope:
    """One scope: ``id`` (unique among a run's scopes; ``run`` for the root), its
    ``task`` (words: what it is for; the root's is the conversation's request, read
    from the journal by the strategies that need it), its ``context`` strategy, its
    output ``cache`` (None: none, a long output is cut to head and tail), its
    ``retry`` policy and its ``parent`` (None for the root). ``role``: the role whose
    model the scope's model calls ask, on a view of the history of its own (None: the
    workflow position's, on the run's history); ``workspace``: the folder its tool
    calls run in (None: the conversation's); ``hands_back``: a ``finish`` call hands
    the work back to the scope's caller (its result says so) instead of ending the
    run, and ``propose_plan`` is refused (the plan is approved already)."""

    id: str = ROOT
    task: str = ""
    context: ContextStrategy = field(default_factory=Flat)
    cache: OutputCache | None = None
    retry: RetryPolicy = field(default_factory=NoRetry)
    parent: Scope | None = None
    role: ModelRole | None = None
    workspace: Path | None = None
    hands_back: bool = False

    @classmethod
    def root(
        cls, settings: EngineSettings, cache: OutputCache | None, workflow: Header | None = None
    ) -> Scope:
        """A run's root scope: the context strategy and the retry policy its settings
        choose, and the engine's output ``cache``; where the ``workflow`` (its header)
        names its own (``[workflow.context]``, ``[workflow.retry]``, ``[workflow.cache]``
        with ``none``: no cache), those (docs/architecture.md, "Workflows")."""
        name, keep, retry = (
            settings.context_strategy,
            settings.context_keep_turns,
            settings.tool_retry,
        )
        if workflow is not None:
            name = workflow.context.strategy or name
            keep = workflow.context.keep_turns or keep
            if workflow.retry.policy:
                retry = retry_policy(workflow.retry.policy, attempts=workflow.retry.attempts or 3)
            if workflow.cache.kind == "none":
                cache = None
        return cls(context=context_strategy(name, keep_turns=keep), cache=cache, retry=retry)

    def at_state(self, strategy: str, keep_turns: int) -> Scope:
        """The root scope with the context strategy a workflow state names (``strategy``;
        empty: this one's), made anew only when it is another."""
        if not strategy or self.id != ROOT or self.context.name == strategy:
            return self
        return replace(self, context=context_strategy(strategy, keep_turns=keep_turns))

    def child(
        self,
        id: str,
        task: str,
        *,
        context: ContextStrategy | Inherit = INHERIT,
        cache: OutputCache | Inherit | None = INHERIT,
        retry: RetryPolicy | Inherit = INHERIT,
        role: ModelRole | Inherit | None = INHERIT,
        workspace: Path | Inherit | None = INHERIT,
        hands_back: bool | Inherit = INHERIT,
    ) -> Scope:
        """A scope nested in this one; each strategy (and ``role``, ``workspace``,
        ``hands_back``) not named is this one's."""
        return Scope(
            id=id,
            task=task,
            context=self.context if isinstance(context, Inherit) else context,
            cache=self.cache if isinstance(cache, Inherit) else cache,
            retry=self.retry if isinstance(retry, Inherit) else retry,
            parent=self,
            role=self.role if isinstance(role, Inherit) else role,
            workspace=self.workspace if isinstance(workspace, Inherit) else workspace,
            hands_back=self.hands_back if isinstance(hands_back, Inherit) else hands_back,
        )

    @property
    def path(self) -> tuple[str, ...]:
        """The tasks of the nested scopes from the root's child down to this one (empty
        for the root: the ``task_tree`` strategy starts the path with the request)."""
        tasks: list[str] = []
        scope: Scope | None = self
        while scope is not None and scope.parent is not None:
            tasks.append(scope.task)
            scope = scope.parent
        return tuple(reversed(tasks))


def open_scopes(journal: Sequence[JournalRecord]) -> dict[str, int]:
    """The nested scopes entered and not left, each with the ``seq`` of its entry."""
    opened: dict[str, int] = {}
    for record in journal:
        entry = record.entry
        if isinstance(entry, ScopeEntered):
            opened[entry.scope] = record.seq
        elif isinstance(entry, ScopeLeft):
            opened.pop(entry.scope, None)
    return opened


def turns_in_scope(journal: Sequence[JournalRecord], scope_id: str) -> int:
    """Model turns journaled since ``scope_id`` was last entered (0 when it never was):
    the count of a loop inside it. Read from the end."""
    turns = 0
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, ScopeEntered) and entry.scope == scope_id:
            return turns
        if isinstance(entry, AssistantTurn):
            turns += 1
    return 0


def left_since_request(journal: Sequence[JournalRecord], scope_id: str) -> ScopeLeft | None:
    """The entry that left ``scope_id`` since the conversation's newest request, if any: a
    composed step whose scope is done for this request is not done again (a run after a
    person's decision, or after a restart, goes through the same composition)."""
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, ScopeLeft) and entry.scope == scope_id:
            return entry
        if isinstance(entry, UserText) and entry.role == "request":
            return None
    return None
