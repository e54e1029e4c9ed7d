"""Two bot processes in Socket Mode, one connection each: every event reaches one of them
and is handled once (issue 27).

The acceptance of issue 27's "Socket Mode with one connection per instance": two real
``threadbot run`` processes with an app token and no signing secret, on one store (a
SQLite file; a PostgreSQL database), each holding one Socket Mode connection to the
fake (:mod:`tests.fakes.slack_socket`), which sends each envelope to the next
connection in turn, as Slack sends each to one of an app's connections. 20
conversations, each told as a person does (:func:`tests.instances.converse`: a
mention ``job N``, the plan, ✅ on it, one ``run_command``, the answer ``done N``),
then 2 more whose mention and ✅ Slack delivers twice at once: to one connection and,
as its retry (``retry_attempt`` 1), to the other, so both processes hold the event
and the delivery key in the store settles which one acts.

What the fakes and the store hold at the end: the fake saw two connections, no more,
and both got envelopes; each envelope went to one connection and was acked once, by
that connection; every thread has one plan and one answer, nothing was posted twice,
each job asked the model three times (plan, command, answer) and ran its command
once, each thread has one conversation, no outbox row is left pending, neither
process logged a traceback, and both end cleanly on SIGTERM.

A retry the delivery key did not drop would show as a second conversation (or, the
two racing, as the store refusing a second conversation for the thread: a traceback
in the log), a second plan or a fourth model request in its thread; the retry is
acked, and handled a moment later, before the rest of its story (the approval, the
command, two more model turns) is told, and the checks come after the processes
ended.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tests.instances import (
    Instances,
    converse,
    doubles,
    finished,
    instances,
    is_answer,
    missing,
    plans,
    posted,
    requests_of,
    said_twice,
    settled,
    side_effects,
    story_model,
)
from tests.process_harness import SocketMode

CONVERSATIONS = 20
RETRIED = 2
"""Conversations after the first 20 whose every event Slack delivers twice at once."""
AT_ONCE = 10
"""Conversations under way at once."""


def both_ways(world: Instances, n: int) -> SocketMode:
    """Where job ``n``'s events go: to one connection and, as Slack's retry, at the same
    time to the other (which is first alternates with ``n``)."""
    assert world.socket is not None
    first, second = world.socket.connected[n % 2], world.socket.connected[(n + 1) % 2]
    return SocketMode(world.socket, connection=first, again=second)


@pytest.mark.timeout(900)  # a stall fails it much sooner, saying what is missing
async def test_two_socket_mode_instances_get_each_event_on_one_connection_and_handle_it_once(
    tmp_path: Path, instances_database: str | None
) -> None:
    plain = range(1, CONVERSATIONS + 1)
    retried = range(CONVERSATIONS + 1, CONVERSATIONS + RETRIED + 1)
    numbers = range(1, CONVERSATIONS + RETRIED + 1)
    async with instances(
        tmp_path, story_model(), database=instances_database, socket_mode=True
    ) as world:
        socket = world.socket
        assert socket is not None
        # each process said it is connected, and the fake saw two connections: one each
        assert (socket.connections_made, socket.connected) == (2, [1, 2])
        await finished(
            world,
            (converse(world, n) for n in plain),
            lambda: missing(world, plain),
            at_once=AT_ONCE,
        )
        spread = Counter(c for e in socket.envelopes() for c in socket.sent_on(e))
        await finished(
            world,
            (converse(world, n, both_ways(world, n)) for n in retried),
            lambda: missing(world, retried),
            at_once=AT_ONCE,
        )
        pending = await settled(world, world.bots[0])
        conversations = dict(
            world.bots[0].query("select thread, count(*) from conversations group by thread")
        )
        made = socket.connections_made
        codes = await world.stop()

    problems = []
    if made != 2:
        problems.append(f"{made} Socket Mode connections were made, not one per process")
    if set(spread) != {1, 2}:
        problems.append(f"envelopes per connection: {dict(spread)}; both should get some")
    sent_all = socket.envelopes()
    for envelope in sent_all:
        sent, acked = socket.sent_on(envelope), socket.acked_on(envelope)
        if len(sent) != 1 or acked != sent:
            problems.append(f"envelope {envelope} sent on connections {sent}, acked on {acked}")
    attempts = [(socket.entry("send", e).data or {}).get("retry_attempt") for e in sent_all]
    retries = [a for a in attempts if a]
    if len(retries) != 2 * RETRIED:  # each retried job's mention and ✅
        problems.append(f"{len(retries)} retries were sent, not {2 * RETRIED}")
    found = doubles(world.api, world.threads)
    if found:
        problems.append(said_twice(found, len(numbers)))
    for n in numbers:
        thread = world.threads[n]
        shown = len(plans(world, thread))
        answers = [t for t in posted(world.api, thread) if is_answer(t, n)]
        asked = len(requests_of(world.model, n))
        opened = conversations.get(thread, 0)
        if (shown, len(answers), asked, opened) != (1, 1, 3, 1):
            problems.append(
                f"job {n}: {shown} plans, {len(answers)} answers, {asked} model requests "
                f"and {opened} conversations in its thread"
            )
    effects = side_effects(world.workspaces)
    wrong = {line: k for line, k in effects.items() if k != 1 or int(line) not in numbers}
    absent = [n for n in numbers if str(n) not in effects]
    if wrong or absent:
        problems.append(f"side effects not once: {wrong} (count per job); none for jobs {absent}")
    if pending:
        problems.append(f"outbox rows still pending (conversation, purpose): {pending}")
    failed = [bot.env["THREADBOT_INSTANCE"] for bot in world.bots if "Traceback" in bot.log]
    if codes != [0, 0] or failed:
        problems.append(f"exit codes {codes}, tracebacks from {failed}:\n{world.logs()}")
    assert not problems, "\n".join(problems)
