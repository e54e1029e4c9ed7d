"""A tool call's attempts: tried again under the run's retry policy while it may help.

:func:`attempted` runs one call's attempts (each one
:func:`core.run.one_call.run_call` makes) under a :mod:`core.retry` policy, and gives
back the output that becomes the call's one result (docs/architecture.md,
"Durability and exactly-once"):

- Which calls: a read-only tool that may be repeated
  (:meth:`core.tools.base.Toolbox.repeatable`). A mutating or control call makes
  one attempt, whatever the policy.
- Which failures: a crash of the tool (any exception but a cancellation or a
  lost lease, a timeout of its own included), and a
  :class:`~core.vocabulary.errors.ToolError` the tool marks ``retryable``. A
  refusal that would come out the same (bad input, a path outside the workspace,
  a ``ToolError`` not marked), an error output the tool returned, and a policy's
  denial (decided before the first attempt) are the result at once.
- Durably: after each failed attempt that is tried again, a
  :class:`~core.vocabulary.entries.ToolAttempt` (its number, its error, the delay)
  is committed on its own, before the wait (the ``after_tool_attempt`` fault point:
  :mod:`core.faults`). A run that goes on after a crash takes the call's attempts
  from the journal: it waits the last one's delay again, makes the next attempt,
  and ends with the result an uninterrupted run would have given. A call picked up
  after a crash makes at least one attempt, even past the policy's limit.
- One result: the last attempt's output, ending with a line that names the attempts
  and each earlier error (``[after 3 attempts: timeout; timeout]``,
  :func:`core.retry.attempts_line`) when there was more than one; after the last
  allowed attempt failed, the policy's fallback (:class:`core.retry.Fallback`).

Waits go through the run context's ``sleep`` (:class:`core.context.RunContext`), so a
stop cancels one at once and a test waits no real time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import assert_never

from core.retry import Fallback, NoRetry, RetryPolicy, attempts_line
from core.run import live
from core.run.deps import RunDeps
from core.run.state import Run
from core.tools.base import ToolOutput
from core.vocabulary.entries import AssistantTurn, JournalRecord, ToolAttempt
from core.vocabulary.journal import Change
from core.vocabulary.tool_records import ToolCallRecord


@dataclass(frozen=True)
class Attempted:
    """One attempt's output, and whether trying the call again may give another."""

    output: ToolOutput
    retryable: bool = False


def policy_for(
    run: Run, deps: RunDeps, record: ToolCallRecord, policy: RetryPolicy | None = None
) -> RetryPolicy:
    """The retry policy of the call ``record``: ``policy`` (else the run's scope's,
    :attr:`core.run.scope.Scope.retry`: the ``tool_retry`` setting in the root scope)
    for a read-only call of a tool that may be repeated, else
    :class:`~core.retry.NoRetry`."""
    if not record.read_only or not deps.toolbox.repeatable(record.name):
        return NoRetry()
    return policy if policy is not None else run.scope.retry


def attempts_of(journal: Sequence[JournalRecord], tool_use_id: str) -> list[ToolAttempt]:
    """The failed attempts journaled for the call ``tool_use_id`` of the newest model turn,
    in order. Reads back to that turn only (its calls' attempts come after it)."""
    found: list[ToolAttempt] = []
    for record in reversed(journal):
        entry = record.entry
        if isinstance(entry, AssistantTurn):
            break
        if isinstance(entry, ToolAttempt) and entry.tool_use_id == tool_use_id:
            found.append(entry)
    return sorted(found, key=lambda a: a.attempt)


async def attempted(
    run: Run,
    deps: RunDeps,
    record: ToolCallRecord,
    once: Callable[[], Awaitable[Attempted]],
    *,
    policy: RetryPolicy | None = None,
) -> ToolOutput:
    """The output of the call ``record`` after its attempts (``once()`` makes one),
    under ``policy`` (:func:`policy_for`); see the module's docstring.

    Raises what ``once`` and the store raise (a lease lost, a cancellation).
    """
    chosen = policy_for(run, deps, record, policy)
    earlier: list[ToolAttempt] = []
    if record.read_only:  # only a read-only call runs again after a crash
        snap = await live.current(run, deps.journal)
        earlier = attempts_of(snap.journal, record.tool_use_id)
    errors = [a.error for a in earlier]
    attempt = len(earlier) + 1
    if earlier:  # picked up after a crash: the wait that the crash cut short, again
        await run.context.sleep(earlier[-1].delay_seconds)
    while True:
        result = await once()
        output = result.output
        if not output.is_error or not result.retryable or attempt >= chosen.attempts:
            return _with_attempts(output, errors, chosen.fallback)
        delay = chosen.delay(attempt, record.tool_use_id)
        error = deps.redactor.redact(output.content)
        tried = ToolAttempt(
            tool_use_id=record.tool_use_id, attempt=attempt, error=error, delay_seconds=delay
        )
        await live.commit(run, deps.journal, Change(entries=(tried,)))
        deps.faults.hit("after_tool_attempt")
        errors.append(error)
        await run.context.sleep(delay)
        attempt += 1


def _with_attempts(output: ToolOutput, errors: Sequence[str], fallback: Fallback) -> ToolOutput:
    """``output``, the last attempt's, as the call's one result: with the line naming
    the earlier attempts (``errors``) when there were any, and for a failure the
    ``fallback`` (the last error, said as given up)."""
    if not errors:
        return output
    match fallback:
        case Fallback.LAST_ERROR:
            gave_up = output.is_error
        case _:
            assert_never(fallback)
    line = attempts_line(errors, gave_up=gave_up)
    content = output.content if output.content.endswith("\n") else f"{output.content}\n"
    made = len(errors) + 1
    note = output.note
    if note:
        note = f"{note} ({'gave up ' if gave_up else ''}after {made} attempts)"
    return replace(output, content=f"{content}{line}", note=note)
