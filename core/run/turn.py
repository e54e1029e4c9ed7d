"""The run's turns, driven: the composed agent goes until the run ends or waits.

:meth:`Turns.go` runs the agent of :mod:`core.run.agent` (``Loop(until done) { tool
steps -> notes -> model step }``, composed of :mod:`core.run.compose` and
:mod:`core.run.steps`) and is the one place a failure inside threadbot becomes a
``failed`` run: the conversation is never left ``running`` with no one working on
it. The turn reads the run's snapshot, which each commit folds its change into
(:mod:`core.run.live`): it never reads back what it just committed.
"""

from __future__ import annotations

import logging

from core.run import live
from core.run.agent import agent
from core.run.deps import RunDeps
from core.run.failing import Fail
from core.run.state import Run
from core.vocabulary.errors import LeaseLost, RequestConflict
from core.vocabulary.inputs import Inbox

log = logging.getLogger(__name__)


class Turns:
    """The turns of one run: what ``run`` knows, what ``deps`` gives it."""

    def __init__(self, run: Run, deps: RunDeps) -> None:
        self._run = run
        self._deps = deps

    async def go(self, inbox: Inbox | None = None) -> None:
        """Go on while the conversation is ``running``: tool steps, model step, repeat.

        A failure inside threadbot (not the model's: those end the run with their
        own message) ends the run ``failed`` with a message in the thread, so a
        conversation is never left ``running`` with no one working on it.
        :class:`core.vocabulary.errors.LeaseLost` is raised as is: another process runs
        the conversation now, and this one must write nothing more. A
        :class:`core.vocabulary.errors.RequestConflict` from a write beside the run that
        ended the conversation (an expiry, a stop) ends the run quietly.
        """
        cid = self._run.conversation_id
        try:
            await live.current(self._run, self._deps.journal)
            compose = self._deps.compose or agent
            await compose(self._deps, inbox).go(self._run)
        except LeaseLost:
            raise  # another process runs the conversation now: write nothing more
        except RequestConflict as exc:
            # A write beside the run (an expiry, a stop) closed what the run was about to
            # close: when that ended the conversation, the run just ends here.
            if await self._still_active():
                await self._failed(exc)
            else:
                log.info("conversation %s: ended beside the run (%s)", cid, exc)
        except Exception as exc:
            await self._failed(exc)

    async def _still_active(self) -> bool:
        try:
            return (await live.reload(self._run, self._deps.journal)).status.active
        except Exception:
            return True  # unknown: record the failure (fail() says so if it cannot)

    async def _failed(self, exc: Exception) -> None:
        cid = self._run.conversation_id
        log.error("conversation %s: the run failed", cid, exc_info=exc)
        try:
            await Fail(self._deps).go_with(
                self._run, f"Something went wrong inside threadbot: {exc}"
            )
        except Exception:
            log.exception("conversation %s: could not record the failure", cid)
