"""``threadbot fork`` against a running bot and across a restart, and the inspector's Stop
across instances (docs/architecture.md, "Rewind and fork").

A real ``threadbot run`` on Slack (HTTP mode) against the local Slack fake, with the
real ``anthropic`` client against the local Messages API fake, on one SQLite file
(:mod:`tests.process_harness`); ``threadbot fork`` is another process on the same
database (:mod:`tests.cli_harness`), as an operator runs it. The running bot picks the
fork up (its deliverer finds the thread's first message in the store at its poll),
posts it at the top of the channel and goes on in that thread; a fork written while no
bot runs is started by the next one. Each fork's first request holds the original's
journal up to the entry forked at (the original's request made right after it) and
then the fork's note; the command's last line is the new conversation's id alone. A
refused operator, an unknown conversation and an entry outside the journal exit 2,
saying why, and write nothing but the audit trail's row of a refused fork where the
conversation is known (``operator:?`` for a name no operator could have). A stop posted
on one instance's
inspector page reaches the run another instance holds: that one kills the command and
ends the run, and the thread says the operator stopped it.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.operators import token_sha256
from core.run.fork import fork_note
from tests.cli_harness import threadbot
from tests.fakes.anthropic_server import FakeAnthropicServer, text, tool_use
from tests.fakes.slack_api import BOT_USER_ID, FakeSlackApi
from tests.inspector_harness import Client
from tests.process_harness import BotProcess, Channel, eventually, live_with, sleep_marker
from tests.slack_harness import CHANNEL
from tests.test_cache_prefix import unmarked

TOKEN = "dana-operator-token-0123456789"
"""The operator's token (test data, not a secret)."""


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeSlackApi, FakeAnthropicServer, Channel]]:
    async with FakeSlackApi() as api, FakeAnthropicServer() as model:
        async with aiohttp.ClientSession() as http:
            yield api, model, Channel(api, http)


def headers_posted(api: FakeSlackApi) -> list[dict[str, Any]]:
    """The bot's top-level messages that start a fork's thread, oldest first."""
    return [
        m
        for m in api.messages(CHANNEL)
        if m.get("user") == BOT_USER_ID
        and m.get("thread_ts", m["ts"]) == m["ts"]  # a parent, not a reply
        and str(m.get("text", "")).startswith("🍴 Forked")
    ]


def lifecycles(bot: BotProcess) -> list[tuple[str]]:
    """Each conversation's lifecycle in ``bot``'s store, sorted."""
    return sorted(bot.query("select lifecycle from conversations"))


async def fork(tmp_path: Path, bot: BotProcess, *args: str, token: str = TOKEN) -> Any:
    """``threadbot fork ARGS...`` on the bot's database, as the operator dana."""
    env = {
        "THREADBOT_DATABASE_URL": bot.database_url,
        "THREADBOT_WORKSPACE_ROOT": str(tmp_path / "workspaces"),
        "THREADBOT_OPERATOR_TOKEN": token,
    }
    return await asyncio.to_thread(threadbot, tmp_path, "fork", *args, env=env)


async def test_threadbot_fork_is_picked_up_by_the_running_bot_and_survives_a_restart(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeAnthropicServer, Channel]
) -> None:
    api, model, channel = fakes
    (tmp_path / "threadbot.toml").write_text(
        f'[operators.dana]\ntoken_sha256 = "{token_sha256(TOKEN)}"\n'
    )
    model.add(
        [text("Looking first."), tool_use("toolu_01", "list_files", {})],
        [tool_use("toolu_02", "finish", {"answer": "Nothing here yet."})],
        [tool_use("toolu_02", "finish", {"answer": "Forked while the bot ran."})],
        [tool_use("toolu_02", "finish", {"answer": "Forked while no bot ran."})],
    )
    bot = BotProcess(tmp_path, api, model.base_url)
    await bot.start()
    try:
        thread = await channel.mention(bot, "look around")
        await eventually(lambda: channel.post_with(thread, "Nothing here yet."))
        await eventually(lambda: bot.query("select lifecycle from conversations") == [("done",)])
        ((original,),) = bot.query("select id from conversations")
        kinds = bot.query(
            "select seq, body from journal where conversation_id = ? order by seq", original
        )
        (at,) = [seq for seq, body in kinds if json.loads(body).get("tool_use_id") == "toolu_01"]
        rows_before = bot.query("select id, action from outbox where conversation_id = ?", original)

        refused = await fork(
            tmp_path, bot, original, "--at", str(at), "--operator", "dana", token="x" * 20
        )
        assert (refused.returncode, refused.stdout) == (2, "")
        assert (
            refused.stderr == "threadbot fork: refused: 'dana' is not an operator with this token\n"
        )
        odd = await fork(tmp_path, bot, original, "--at", str(at), "--operator", "x\ny")
        assert odd.returncode == 2 and "is not an operator with this token" in odd.stderr
        past = await fork(tmp_path, bot, original, "--at", "999", "--operator", "dana")
        assert past.returncode == 2
        assert (
            f"conversation {original} has no journal entry 999: its journal runs 1 to"
            in past.stderr
        )
        unknown = await fork(tmp_path, bot, "nope", "--at", "1", "--operator", "dana")
        assert unknown.returncode == 2 and "there is no conversation nope" in unknown.stderr
        assert bot.query("select count(*) from conversations") == [(1,)]
        refusals = bot.query(
            "select conversation_id, request_id, user_id, means, outcome, reason from audit "
            "where request_kind = 'fork' order by id"
        )  # the unknown conversation has none: there is nothing to record it on
        odd_refused = "refused: ? is not an operator with this token"  # not the name given
        assert refusals == [
            (original, str(at), "operator:dana", "command", "refused", refused.stderr[16:-1]),
            (original, str(at), "operator:?", "command", "refused", odd_refused),
            (original, "999", "operator:dana", "command", "refused", past.stderr[16:-1]),
        ]

        made = await fork(tmp_path, bot, original, "--at", str(at), "--operator", "dana")
        assert made.returncode == 0, made.stderr
        assert made.stdout.startswith(f"forked conversation {original} at entry {at} into ")
        new = made.stdout.splitlines()[-1]  # the last line: the new conversation's id alone
        assert bot.query("select id from conversations where id = ?", new) == [(new,)]
        await eventually(lambda: len(headers_posted(api)) == 1)
        (header,) = headers_posted(api)
        assert header["text"] == (
            f"🍴 Forked by operator dana from the thread {thread} in <#{CHANNEL}> at entry {at} "
            f"of its journal (conversation {original}); it goes on from there."
        )
        await eventually(lambda: channel.post_with(str(header["ts"]), "Forked while the bot ran."))
        # The answer shows as it streams, before the run's last commit: a kill before that
        # would leave the fork running, and the next bot would ask the model for it again.
        await eventually(lambda: lifecycles(bot) == [("done",)] * 2)
    finally:
        await bot.kill()

    while_down = await fork(tmp_path, bot, original, "--at", str(at), "--operator", "dana")
    assert while_down.returncode == 0, while_down.stderr
    again = BotProcess(tmp_path, api, model.base_url)
    await again.start()
    try:
        await eventually(lambda: len(headers_posted(api)) == 2)
        second = headers_posted(api)[1]
        await eventually(lambda: channel.post_with(str(second["ts"]), "Forked while no bot ran."))
        await eventually(lambda: lifecycles(again) == [("done",)] * 3)
    finally:
        await again.kill()

    after_at = model.requests[1].body
    expected = copy.deepcopy(unmarked(after_at["messages"]))
    note = {"type": "text", "text": f"[threadbot: fork] {fork_note('dana', at, cloned=False)}"}
    expected[-1]["content"].append(note)
    assert unmarked(model.requests[2].body["messages"]) == expected
    assert unmarked(model.requests[3].body["messages"]) == expected
    assert again.query("select id, action from outbox where conversation_id = ?", original) == (
        rows_before
    )
    forks = again.query(
        "select user_id, means, outcome, request_id from audit "
        "where request_kind = 'fork' and outcome = 'forked'"
    )
    assert forks == [("operator:dana", "command", "forked", str(at))] * 2


async def test_a_stop_from_one_instances_page_stops_the_run_another_instance_holds(
    tmp_path: Path, fakes: tuple[FakeSlackApi, FakeAnthropicServer, Channel]
) -> None:
    api, model, channel = fakes
    (tmp_path / "threadbot.toml").write_text(
        f'[operators.dana]\ntoken_sha256 = "{token_sha256(TOKEN)}"\n'
    )
    marker = sleep_marker()  # this test's command alone sleeps so long
    model.add(
        [tool_use("toolu_plan", "propose_plan", {"steps": ["Run the long job"]})],
        [tool_use("toolu_job", "run_command", {"command": f"sleep {marker}"})],
    )
    settings = {"progress_interval": "0", "lease_ttl": "600", "inspector": "true"}
    runner = BotProcess(tmp_path, api, model.base_url, **settings)
    other = BotProcess(tmp_path, api, model.base_url, **settings)
    try:
        await runner.start()
        await other.start()
        thread = await channel.mention_and_approve(runner, "run the long job")
        group = "select process_group from tool_calls where tool_use_id = 'toolu_job'"
        await eventually(lambda: runner.query(group) not in ([], [(None,)]))
        ((cid, holder),) = other.query("select id, lease_owner from conversations")
        assert holder is not None and str(runner.proc.pid if runner.proc else "") in holder

        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            client = Client(other.ops_url, http)
            assert (await client.sign_in("dana", TOKEN)).status == 303
            page = await client.get(f"/inspector/conversations/{cid}")
            assert f'data-stop="{cid}"' in page.text
            answer = await client.post(f"/inspector/conversations/{cid}/stop")
            assert answer.status == 303, answer.text

        await eventually(lambda: channel.post_with(thread, "Stopped by operator dana"))
        assert "⏹ Stopping…" in channel.texts(thread)  # asked of the holder, said at once
        await eventually(
            lambda: runner.query("select lifecycle from conversations") == [("cancelled",)]
        )
        assert runner.query("select state from tool_calls where tool_use_id = 'toolu_job'") == [
            ("interrupted",)
        ]
        assert not live_with(marker)  # the holder killed the command
        assert runner.query(
            "select user_id, means, outcome from audit where request_kind = 'stop'"
        ) == [("operator:dana", "inspector", "stopped")]
    finally:
        await runner.kill()
        await other.kill()
