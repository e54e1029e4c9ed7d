"""Scheduled runs in memory: each ``(schedule, due)`` recorded once."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime

from conversations.events import PlatformRef
from conversations.store.memory._tables import Conversation, Tables, checkpoint
from conversations.store.memory.inbox import add_delivery
from conversations.store.records import new_conversation_id
from conversations.store.schedules import Opening, Outcome, ScheduleRun, unbound_thread
from core.vocabulary.lifecycle import IDLE


class MemorySchedules:
    """:class:`conversations.store.schedules.Schedules` in memory."""

    def __init__(self, tables: Tables) -> None:
        self._t = tables

    async def last_due(self, schedules: Collection[str]) -> dict[str, datetime]:
        """The newest due time recorded of each schedule named."""
        await checkpoint()
        found: dict[str, datetime] = {}
        for name, due in self._t.schedule_runs:
            if name in schedules and (name not in found or due > found[name]):
                found[name] = due
        return found

    async def note(
        self, schedule: str, due: datetime, outcome: Outcome, *, by: str, at: datetime
    ) -> bool:
        """Record a time ``skipped`` or ``seen``; False when it was recorded before."""
        await checkpoint()
        return self._record(schedule, due, outcome, by, at, None)

    async def start(
        self, schedule: str, due: datetime, *, by: str, at: datetime, opening: Opening
    ) -> str | None:
        """Record the time ``started`` and open its conversation, at once."""
        await checkpoint()
        conversation_id = new_conversation_id()
        if not self._record(schedule, due, Outcome.STARTED, by, at, conversation_id):
            return None
        add_delivery(self._t, opening.delivery_key, conversation_id, opening.event)
        now = self._t.clock()
        self._t.conversations[conversation_id] = Conversation(
            id=conversation_id,
            binding=opening.place.in_thread(unbound_thread(conversation_id)).model_copy(
                update={"user": None}
            ),
            requester=opening.requester,
            status=IDLE,
            position=opening.position,
            workspace_dir=str(opening.workspace_root / conversation_id),
            created_at=now,
            updated_at=now,
        )
        out = opening.announce
        row = self._t.add_outbox(conversation_id, out.action, out.purpose, out.request_id)
        self._t.on_outbox([row.record()])
        return conversation_id

    async def bind_thread(self, conversation_id: str, binding: PlatformRef) -> bool:
        """Bind the conversation while its thread is the placeholder."""
        await checkpoint()
        found = self._t.conversations.get(conversation_id)
        if found is None or found.binding.thread != unbound_thread(conversation_id):
            return False
        found.binding = found.binding.model_copy(
            update={"channel": binding.channel, "thread": binding.thread, "parent": binding.parent}
        )
        found.updated_at = self._t.clock()
        return True

    async def runs(self, schedule: str | None = None) -> list[ScheduleRun]:
        """The records, by schedule, oldest time first."""
        await checkpoint()
        return [
            run
            for _key, run in sorted(self._t.schedule_runs.items())
            if schedule is None or run.schedule == schedule
        ]

    def _record(
        self,
        schedule: str,
        due: datetime,
        outcome: Outcome,
        by: str,
        at: datetime,
        conversation_id: str | None,
    ) -> bool:
        key = (schedule, due.astimezone(UTC))
        if key in self._t.schedule_runs:
            return False
        self._t.schedule_runs[key] = ScheduleRun(
            schedule=schedule,
            due=key[1],
            outcome=outcome,
            by=by,
            at=at.astimezone(UTC),
            conversation_id=conversation_id,
        )
        return True
