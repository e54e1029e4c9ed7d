"""How a run fails: a model failure a retry may mend, the workflow's ``error``
transition, or the end ``failed`` (docs/architecture.md, "The agent as a composition"
and "Workflows").
"""

from __future__ import annotations

from core.requests import go_on
from core.run import live
from core.run.arrivals import arrival
from core.run.close_calls import close_open_calls
from core.run.compose import CONTINUE, DONE, WAIT, Flow, Outcome
from core.run.deps import RunDeps
from core.run.state import Run
from core.vocabulary import lifecycle
from core.vocabulary.journal import Change
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.run_events import ProgressNote, RunFailed
from core.workflows.model import Outcome as StateOutcome
from core.workflows.moves import follow


async def _commit(run: Run, deps: RunDeps, change: Change) -> None:
    await live.commit(run, deps.journal, change)


class ModelFailed:
    """After ``failed``, a ``model_failed`` outcome: a failure a retry may mend opens a
    request to try again (``wait``); any other takes the workflow's ``error``
    transition where it has one (the state's, or the workflow's error state:
    ``continue`` there, with a note saying what failed), else ends the run ``failed``
    with its message (``done``)."""

    def __init__(self, deps: RunDeps, failed: Outcome) -> None:
        self._deps = deps
        self._failed = failed

    async def go(self, run: Run) -> Outcome:
        """Open the retry request, take the error transition, or fail the run."""
        failed = self._failed
        deps = self._deps
        if failed.flow is Flow.DONE:
            snap = run.snap
            target = follow(run.workflow, snap, StateOutcome.ERROR)
            if target == snap.position:
                await Fail(deps).go_with(run, failed.reason)
                return DONE
            note = ProgressNote(text=f"error: {failed.reason}", step=snap.position, mark="⚠️")
            moved = arrival(run.workflow, snap, target, status=snap.status, settings=run.settings)
            await _commit(run, deps, Change(events=(note,)).then(moved))
            return CONTINUE if run.snap.status.lifecycle is Lifecycle.RUNNING else DONE
        await _commit(run, deps, go_on.open_retry(run.snap, failed.reason, run.opening))
        return WAIT


class Fail:
    """End the run ``failed`` with an error (safe to show); every open call gets a result."""

    def __init__(self, deps: RunDeps) -> None:
        self._deps = deps

    async def go_with(self, run: Run, error: str) -> None:
        """Commit the failure: open calls closed, ``failed``, the error in the thread."""
        deps = self._deps
        snap = await live.current(run, deps.journal)
        closing = close_open_calls(snap, "the failure", deps.toolbox.read_only, failed=True)
        await _commit(
            run,
            deps,
            Change(
                entries=closing.results,
                tool_calls=closing.records,
                status=lifecycle.move(snap.status, lifecycle.FAILED),
                events=(RunFailed(error=error),),
            ),
        )
