"""The limits and priorities the settings give: this process's slots, a workflow's priority.

(docs/architecture.md, "Limits and priorities".) :func:`slots_for` builds the process's
:class:`conversations.slots.Slots` when some limit is set (``max_runs``,
``cluster_max_runs``, ``model_calls_at_once``, ``commands_at_once``, or in any layer a
``workspace_runs`` or a ``user_runs`` that queues), else None: nothing waits and
nothing is written. :func:`workflow_priority` tells the hub the priority of the
workflow a conversation runs, when some workflow declares one.
"""

from __future__ import annotations

from bot.layers import ConversationSettings, Layers
from bot.settings import Settings
from conversations.hub._settings import WorkflowPriority
from conversations.slots import SlotLimits, Slots
from conversations.store import ConversationInfo, Store
from core.run.workflow import asked_for, journaled
from core.vocabulary.journal import Journal
from core.workflows.loading import WorkflowLibrary


def slot_limits(settings: Settings) -> SlotLimits:
    """The limits of ``settings`` that are not per channel."""
    return SlotLimits(
        max_runs=settings.max_runs,
        cluster_max_runs=settings.cluster_max_runs,
        model_calls_at_once=settings.model_calls_at_once,
        commands_at_once=settings.commands_at_once,
        priority_aging=settings.priority_aging,
    )


def slots_for(settings: Settings, layers: Layers, store: Store, instance: str) -> Slots | None:
    """The slots of this process (``instance``) in ``store``, or None when no limit is set
    anywhere (see the module docstring)."""
    limits = slot_limits(settings)
    process_wide = (
        limits.max_runs,
        limits.cluster_max_runs,
        limits.model_calls_at_once,
        limits.commands_at_once,
    )
    if all(limit is None for limit in process_wide) and not layers.queues_anywhere():
        return None
    return Slots(
        store=store.slots,
        owner=instance,
        limits=limits,
        ttl=settings.lease_ttl,
        poll=settings.wakeup_poll,
        wakeups=store.wakeups,
    )


def workflow_priority(
    library: WorkflowLibrary, places: ConversationSettings, journal: Journal
) -> WorkflowPriority | None:
    """The priority of a conversation's workflow: the one it journaled (its definition as
    chosen), else, for a first request, the one it asks for (``workflow=NAME``) or its
    channel's ``workflow``; None when no workflow of ``library`` declares a priority
    (every one is 0, and no journal is read)."""
    if not any(library[name].workflow.priority for name in library.names):
        return None

    async def priority(conversation: ConversationInfo, text: str | None) -> int:
        chosen = journaled((await journal.load(conversation.id)).journal)
        if chosen is not None:
            return chosen.workflow.priority
        asked = asked_for(text)[0] if text is not None else None
        name = asked or places.at(conversation.binding)["workflow"]
        return library[name].workflow.priority if name in library else 0

    return priority
