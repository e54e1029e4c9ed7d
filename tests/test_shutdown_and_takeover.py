"""A graceful SIGTERM, and a process that lost its lease while paused, with real processes.

Both run ``threadbot run`` on Slack (HTTP mode) against the local Slack fake, with
the real ``anthropic`` client against the local Messages API fake, on one SQLite
file (:mod:`tests.process_harness`):

- SIGTERM while a command runs: after the grace the command is killed and recorded
  ``interrupted``, the notes held back are delivered, the lease is released and
  the process exits 0; the next start goes on and the model reads the result.
- Two processes: A runs a command and is SIGSTOPped past its lease; B takes the
  conversation over and finishes it; A, continued, has its next commit refused and
  writes nothing after B's first entry.
- A stop sent to B for a run whose holder A was killed: at once when A was a
  process of this host (its 600 s lease still unexpired), and, when A is named as
  another host's, said at once and done when A's lease lapses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from core.tools.processes import group_alive
from tests.fakes.anthropic_server import FakeAnthropicServer, text, tool_use
from tests.fakes.slack_api import FakeSlackApi
from tests.process_harness import BotProcess, Channel, eventually, live_with
from tests.slack_harness import ALICE

PLAN = [tool_use("toolu_plan", "propose_plan", {"steps": ["Look around", "Run the long job"]})]


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeSlackApi, FakeAnthropicServer, Channel]]:
    async with FakeSlackApi() as api, FakeAnthropicServer() as model:
        async with aiohttp.ClientSession() as http:
            yield api, model, Channel(api, http)


def tool_results(request_body: dict) -> list[dict]:
    """The ``tool_result`` blocks of the last user message of a Messages API request."""
    last = request_body["messages"][-1]
    content = last["content"] if isinstance(last["content"], list) else []
    return [block for block in content if block.get("type") == "tool_result"]


async def test_sigterm_lets_the_step_end_delivers_what_is_pending_and_exits_0(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeAnthropicServer, Channel]
) -> None:
    api, model, channel = fakes
    marker = f"60.{secrets.randbelow(10**9):09d}"  # this test's command alone sleeps so long
    model.add(
        PLAN,
        [
            text("Looking around first."),
            tool_use(
                "toolu_ls", "run_command", {"command": "until [ -f go ]; do sleep 0.05; done"}
            ),
        ],
        [
            text("Now the long job."),
            tool_use("toolu_job", "run_command", {"command": f"touch started; sleep {marker}"}),
        ],
        [
            tool_use(
                "toolu_finish",
                "finish",
                {"answer": "Picked up after the restart: the job was interrupted."},
            )
        ],
    )
    # Notes are held back for a minute, so some are still pending at the SIGTERM.
    settings = {"shutdown_grace": "1", "progress_interval": "60"}
    bot = BotProcess(tmp_path, api, model.base_url, **settings)
    await bot.start()
    try:
        thread = await channel.mention_and_approve(bot, "run the long job")
        # The run waits at its first command until the approval's edit is out: no
        # milestone comes after the notes, so the notes stay held back.
        await eventually(lambda: channel.post_with(thread, "Approved by"))
        await eventually(lambda: list(tmp_path.glob("workspaces/*")))
        (workspace,) = await asyncio.to_thread(lambda: list(tmp_path.glob("workspaces/*")))
        await asyncio.to_thread((workspace / "go").touch)
        await eventually(lambda: (workspace / "started").exists())
        assert bot.query("select state from outbox where state = 'pending'")  # notes held back

        assert live_with(marker)
        bot.signal(signal.SIGTERM)
        assert await bot.wait() == 0, bot.log
        assert not live_with(marker)  # the shutdown left no process of the command
    finally:
        await bot.kill()

    assert bot.query("select state from tool_calls where tool_use_id = 'toolu_job'") == [
        ("interrupted",)
    ]
    assert bot.query("select count(*) from outbox where state = 'pending'") == [(0,)]
    assert bot.query("select lease_owner, lifecycle from conversations") == [(None, "running")]
    assert any("Now the long job." in t for t in channel.texts(thread))  # flushed at shutdown

    again = BotProcess(tmp_path, api, model.base_url, **settings)
    await again.start()
    try:
        await eventually(lambda: channel.post_with(thread, "Picked up after the restart"))
        (result,) = tool_results(model.requests[-1].body)
        assert result["tool_use_id"] == "toolu_job"
        assert "Interrupted while it ran: the bot was shutting down" in json.dumps(result)
        assert again.query("select lifecycle from conversations") == [("done",)]
        again.signal(signal.SIGTERM)
        assert await again.wait() == 0, again.log
    finally:
        await again.kill()


async def test_a_process_paused_past_its_lease_writes_nothing_after_the_takeover(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeAnthropicServer, Channel]
) -> None:
    api, model, channel = fakes
    job = "touch started; while [ ! -f go ]; do sleep 0.05; done; echo A-$((40 + 2))"  # prints A-42
    model.add(
        PLAN,
        [tool_use("toolu_job", "run_command", {"command": job})],
        [
            tool_use(
                "toolu_finish",
                "finish",
                {"answer": "Checked the workspace; finished by the second instance."},
            )
        ],
    )
    settings = {"lease_ttl": "1.5", "progress_interval": "0"}
    first = BotProcess(tmp_path, api, model.base_url, **settings)
    second = BotProcess(tmp_path, api, model.base_url, **settings)
    await first.start()
    try:
        thread = await channel.mention_and_approve(first, "run the job")
        await eventually(lambda: list(tmp_path.glob("workspaces/*/started")))

        first.signal(signal.SIGSTOP)  # paused, as by a long GC pause or a partition
        await second.start()  # resumes the running conversation once A's lease lapses
        await eventually(lambda: second.query("select lifecycle from conversations") == [("done",)])
        ((workspace,),) = second.query("select workspace_dir from conversations")
        await asyncio.to_thread(Path(workspace, "go").write_text, "")  # A may finish now
        taken_over = second.query("select max(seq) from journal")[0][0]

        first.signal(signal.SIGCONT)
        await eventually(lambda: "no longer holds its lease" in first.log)
        for bot in (first, second):
            bot.signal(signal.SIGTERM)
            assert await bot.wait() == 0, bot.log
    finally:
        await first.kill()
        await second.kill()

    ((conversation_id,),) = second.query("select id from conversations")
    refused = [line for line in first.stderr if "no longer holds its lease" in line]
    assert refused and f"[{conversation_id}]" in refused[0]  # logs name the conversation
    assert second.query("select max(seq) from journal")[0][0] == taken_over
    bodies = [body for (body,) in second.query("select body from journal")]
    assert not any("A-42" in body for body in bodies)  # A's command output
    assert second.query("select state from tool_calls where tool_use_id = 'toolu_job'") == [
        ("unknown",)
    ]
    results = second.query(
        "select count(*) from journal where body like '%toolu_job%' and kind = 'tool_result'"
    )
    assert results == [(1,)]
    assert channel.post_with(thread, "finished by the second instance") is not None


async def test_a_stop_sent_to_the_other_instance_stops_the_command_where_it_runs(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeAnthropicServer, Channel]
) -> None:
    api, model, channel = fakes
    model.add(PLAN, [tool_use("toolu_job", "run_command", {"command": "sleep 60"})])
    runner = BotProcess(tmp_path, api, model.base_url, progress_interval="0")
    other = BotProcess(tmp_path, api, model.base_url, progress_interval="0")
    await runner.start()
    await other.start()
    try:
        thread = await channel.mention_and_approve(runner, "run the job")
        command = "select process_group from tool_calls where tool_use_id = 'toolu_job'"
        await eventually(lambda: runner.query(command) not in ([], [(None,)]))
        ((pid,),) = runner.query(command)

        await channel.slash(other, "/stop")  # the instance that does not run it

        await eventually(lambda: channel.post_with(thread, "Stopped by"))
        await eventually(lambda: not group_alive(pid))
        assert runner.query("select state from tool_calls where tool_use_id = 'toolu_job'") == [
            ("interrupted",)
        ]
        results = runner.query(
            "select count(*) from journal where kind = 'tool_result' and body like '%toolu_job%'"
        )
        assert results == [(1,)]
        assert runner.query("select count(*) from stop_requests where handled_at is null") == [(0,)]
        stopped = [t for t in channel.texts(thread) if "Stopped by" in t]
        assert len(stopped) == 1, channel.texts(thread)
        for bot in (runner, other):
            bot.signal(signal.SIGTERM)
            assert await bot.wait() == 0, bot.log
    finally:
        await runner.kill()
        await other.kill()


STOPPED = f"⏹ Stopped by <@{ALICE}>. 1 tool call interrupted while running."


def killed_with(marker: str) -> None:
    """SIGKILL what is left of this test's command (its marker is in its command line)."""
    for pid in live_with(marker):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def holder_killed(channel: Channel, runner: BotProcess, other: BotProcess) -> str:
    """``runner`` runs a command in a conversation and is SIGKILLed; ``other``, started
    beside it, never touched the conversation. The thread's ts."""
    await runner.start()
    await other.start()
    thread = await channel.mention_and_approve(runner, "run the job")
    group = "select process_group from tool_calls where tool_use_id = 'toolu_job'"
    await eventually(lambda: runner.query(group) not in ([], [(None,)]))
    runner.signal(signal.SIGKILL)
    assert await runner.wait() == -signal.SIGKILL
    assert runner.query("select lifecycle from conversations") == [("running",)]
    return thread


async def test_a_stop_for_a_run_whose_holder_was_killed_on_this_host_stops_at_once(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeAnthropicServer, Channel]
) -> None:
    api, model, channel = fakes
    marker = f"sleep 60.{secrets.randbelow(10**6):06d}"  # this test's command only
    model.add(PLAN, [tool_use("toolu_job", "run_command", {"command": marker})])
    settings = {"progress_interval": "0", "lease_ttl": "600"}
    runner = BotProcess(tmp_path, api, model.base_url, **settings)
    other = BotProcess(tmp_path, api, model.base_url, **settings)
    try:
        thread = await holder_killed(channel, runner, other)
        ((until,),) = other.query("select lease_until from conversations")
        said = len(channel.texts(thread))

        await channel.slash(other, "/stop")

        await eventually(lambda: channel.post_with(thread, "Stopped by"))
        assert datetime.fromisoformat(until) > datetime.now(UTC).replace(tzinfo=None)
        assert channel.texts(thread)[said:] == [STOPPED]
        await eventually(  # the lease is let go just after the stop's message is written
            lambda: (
                other.query("select lifecycle, lease_owner from conversations")
                == [("cancelled", None)]
            )
        )
        assert other.query("select state from tool_calls where tool_use_id = 'toolu_job'") == [
            ("interrupted",)
        ]
        assert other.query("select count(*) from stop_requests") == [(0,)]  # nobody was asked
        other.signal(signal.SIGTERM)
        assert await other.wait() == 0, other.log
    finally:
        await runner.kill()
        await other.kill()
        killed_with(marker)


async def test_a_stop_for_a_holder_on_another_host_is_said_at_once_and_done_when_it_lapses(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeAnthropicServer, Channel]
) -> None:
    api, model, channel = fakes
    marker = f"sleep 60.{secrets.randbelow(10**6):06d}"
    model.add(PLAN, [tool_use("toolu_job", "run_command", {"command": marker})])
    settings = {"progress_interval": "0", "lease_ttl": "600"}
    elsewhere = f"elsewhere-{secrets.token_hex(4)}"  # not host:pid: only its lease tells
    runner = BotProcess(tmp_path, api, model.base_url, instance=elsewhere, **settings)
    other = BotProcess(tmp_path, api, model.base_url, **settings)
    try:
        thread = await holder_killed(channel, runner, other)
        said = len(channel.texts(thread))

        await channel.slash(other, "/stop")

        await eventually(lambda: channel.texts(thread)[said:] == ["⏹ Stopping…"])
        # "Stopping…" is posted before the request is written (so the holder's "Stopped"
        # cannot come first): the request follows it.
        await eventually(
            lambda: (
                other.query("select count(*) from stop_requests where handled_at is null") == [(1,)]
            )
        )
        assert other.query("select lifecycle, lease_owner from conversations") == [
            ("running", elsewhere)
        ]
        # That host is gone for good: its lease and its delivery claim lapse (set in the
        # store, not waited for).
        other.query(
            "update conversations set lease_until = '2000-01-01 00:00:00.000000', "
            "delivery_until = '2000-01-01 00:00:00.000000'"
        )

        await eventually(lambda: channel.post_with(thread, "Stopped by"))
        assert channel.texts(thread)[said:] == [
            "⏹ Stopping…",
            STOPPED,
        ]
        await eventually(  # the lease is let go just after the stop's message is written
            lambda: (
                other.query("select lifecycle, lease_owner from conversations")
                == [("cancelled", None)]
            )
        )
        assert other.query("select count(*) from stop_requests where handled_at is null") == [(0,)]
        other.signal(signal.SIGTERM)
        assert await other.wait() == 0, other.log
    finally:
        await runner.kill()
        await other.kill()
        killed_with(marker)
