"""Two bot processes on one database behind a round-robin proxy: everything once (issue 26).

The acceptance of issue 26's claims: two real ``threadbot run`` processes on one
store (a SQLite file; a PostgreSQL database), each Slack request sent to the next
one in turn (:class:`tests.instances.RoundRobin`), against the Slack fake answering
every post after 0.3 s (two processes that both deliver a message show it only
then). 100 conversations, at most 25 under way at once, each told as a person does
(:func:`tests.instances.converse`): a mention ``job N``, the plan, ✅ on it, one
``run_command`` that appends ``N`` to a file of its workspace, the answer ``done N``.

What the fakes and the store hold at the end: every thread has exactly one plan and
exactly one answer, no text was posted twice in any thread, every command's side
effect happened exactly once, no outbox row is left pending, and both processes
end cleanly on SIGTERM.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.instances import (
    converse,
    doubles,
    finished,
    instances,
    is_answer,
    missing,
    plans,
    posted,
    said_twice,
    settled,
    side_effects,
    story_model,
)

CONVERSATIONS = 100
AT_ONCE = 25
"""Conversations under way at once (each a mention, an approval, a command, an answer)."""


@pytest.mark.timeout(1800)  # a stall fails it much sooner, saying what is missing
async def test_two_instances_post_every_message_once_and_run_every_call_once(
    tmp_path: Path, instances_database: str | None
) -> None:
    numbers = range(1, CONVERSATIONS + 1)
    async with instances(tmp_path, story_model(), database=instances_database) as world:
        await finished(
            world,
            (converse(world, n) for n in numbers),
            lambda: missing(world, numbers),
            at_once=AT_ONCE,
        )
        pending = await settled(world, world.bots[0])
        codes = await world.stop()

    problems = []
    found = doubles(world.api, world.threads)
    if found:
        problems.append(said_twice(found, CONVERSATIONS))
    for n in numbers:
        thread = world.threads[n]
        shown = len(plans(world, thread))
        answers = [t for t in posted(world.api, thread) if is_answer(t, n)]
        if shown != 1 or len(answers) != 1:
            problems.append(f"job {n}: {shown} plans and {len(answers)} answers in its thread")
    effects = side_effects(world.workspaces)
    wrong = {line: k for line, k in effects.items() if k != 1 or int(line) not in numbers}
    absent = [n for n in numbers if str(n) not in effects]
    if wrong or absent:
        problems.append(f"side effects not once: {wrong} (count per job); none for jobs {absent}")
    if pending:
        problems.append(f"outbox rows still pending (conversation, purpose): {pending}")
    if codes != [0, 0]:
        problems.append(f"exit codes {codes}:\n{world.logs()}")
    assert not problems, "\n".join(problems)
