"""Step slots: a model call or a command waits for a slot of its category first.

How many model calls and commands go at once is a limit of the deployment, not of one
run (docs/architecture.md, "Limits and priorities"): the run asks its
:attr:`core.run.deps.RunDeps.slots` to :meth:`StepSlots.hold` a ``model`` slot around
each model call (:mod:`core.run.model_turn`) and a ``command`` slot around each
attempt of a ``run_command`` call (:mod:`core.run.one_call`), and goes on inside the
block. Core knows only this protocol; the bot plugs in the store's slots
(``conversations/slots.py``), and by default nothing is limited (:data:`UNLIMITED`).
A stop cancels a wait like any step.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Literal, Protocol

from core.tools.control import RUN_COMMAND

StepCategory = Literal["model", "command"]
"""What a step's slot is for: a model call, or a command."""


class StepSlots(Protocol):
    """Slots for a run's steps (see the module docstring)."""

    def hold(
        self, conversation_id: str, category: StepCategory
    ) -> AbstractAsyncContextManager[None]:
        """Wait for a slot of ``category`` for a step of the conversation's run, hold it
        for the block, free it when the block ends (however it ends)."""
        ...


class Unlimited:
    """:class:`StepSlots` where nothing is limited: every step goes on at once."""

    @contextlib.asynccontextmanager
    async def hold(self, conversation_id: str, category: StepCategory) -> AsyncIterator[None]:
        """Go on at once."""
        yield


UNLIMITED = Unlimited()
"""The default: no step waits."""


def command_slot(
    slots: StepSlots, conversation_id: str, tool: str
) -> AbstractAsyncContextManager[None]:
    """The ``command`` slot a call of ``tool`` holds while it runs (``run_command``), or
    none for any other tool."""
    if tool == RUN_COMMAND:
        return slots.hold(conversation_id, "command")
    return contextlib.nullcontext()
