"""Model roles (issue 28, its first slice): the planner's, the executor's and the expert's
model, in every settings layer.

The planning position asks the planner's model and the executing position the
executor's, seen where the model sees it: the ``model`` of each request the local
Messages API fake received (through the real ``anthropic`` client), and a scripted
model's script per role. Each call is journaled and kept in ``model_calls`` with its
role: ``threadbot usage --by role`` (the command, in its own process) and the
answer's footer show each role's calls and cost. The settings: each role's key in
the environment, the TOML file and a workspace's or channel's layer, with its layer
in ``threadbot settings explain``; a dollar budget needs a price for every role's
model; migration 0012 keeps the calls made before it, with no role.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bot.app import build
from bot.settings import Settings
from conversations.render import render_event
from conversations.store.sql import SqlStore, create_engine
from core.models.scripted import ScriptedCall, ScriptedRoles, ScriptedTurn
from core.run.settings import EngineSettings
from core.vocabulary.entries import AssistantTurn
from core.vocabulary.lifecycle import Lifecycle
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.slack_api import TEAM_ID
from tests.harness import Chat
from tests.migration_crashes import upgrade
from tests.slack_harness import CHANNEL
from tests.test_budgets import refused
from tests.test_cache_prefix import running
from tests.test_settings_layers import OTHER, explain_channel, layered, threadbot
from tests.test_usage_report import PRICE, SCRIPT, footer_of, usage

DEARER_PRICE = PRICE.model_copy(update={"input": 15.0, "output": 75.0})


# --- each position asks its role's model -------------------------------------------------


async def test_the_planner_plans_and_the_executor_carries_the_plan_out(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    sqlite_settings.planner_model = "claude-plans"
    sqlite_settings.executor_model = "claude-does"
    sqlite_settings.prices = {"claude-plans": DEARER_PRICE, "claude-does": PRICE}
    async with FakeAnthropicServer(SCRIPT) as server:
        async with running(sqlite_settings, server) as app:
            chat = Chat(app)
            await chat.mention("write a.md")
            await chat.react(chat.bot_message("📋 Plan (v1)"))
            await app.hub.settled()
            assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
            journal = (await chat.snapshot()).journal
            shown = chat.out.getvalue()
        asked = [request.body["model"] for request in server.requests]

    # The plan from the planner's model, the work and the answer from the executor's.
    assert asked == ["claude-plans", "claude-does", "claude-does"]
    turns = [r.entry for r in journal if isinstance(r.entry, AssistantTurn)]
    assert [(t.model, t.usage and t.usage.role) for t in turns] == [
        ("claude-plans", "planner"),
        ("claude-does", "executor"),
        ("claude-does", "executor"),
    ]
    # The planner's call: 1,200 x 15 + 80 x 75 + 3,000 x 3.75 = 35,250 µ$; the
    # executor's two at the cheaper price, 7,600 + 3,334 = 10,934 µ$ (test_usage_report).
    footer = footer_of(chat, "✅ Written.")
    assert footer.endswith(" · $0.05 · workflow default")  # 46,184 µ$
    lines = shown[shown.index(footer) :].splitlines()
    assert lines[1].strip() == (
        "— planner claude-plans: 1 model call, $0.04 · executor claude-does: 2 model calls, $0.01"
    )

    by_role = usage(tmp_path, sqlite_settings, "--by", "role")
    assert by_role["by"] == "role"
    assert [(line["key"], line["calls"], line["cost_micro_usd"]) for line in by_role["lines"]] == [
        ("executor", 2, 10_934),
        ("planner", 1, 35_250),
    ]
    by_model = usage(tmp_path, sqlite_settings, "--by", "model")
    assert [(line["key"], line["calls"]) for line in by_model["lines"]] == [
        ("claude-does", 2),
        ("claude-plans", 1),
    ]
    database = sqlite_settings.database_url.removeprefix("sqlite+aiosqlite:///")
    with sqlite3.connect(database) as db:
        rows = db.execute("select position, role, model from model_calls order by id").fetchall()
    assert rows == [
        ("planning", "planner", "claude-plans"),
        ("executing", "executor", "claude-does"),
        ("executing", "executor", "claude-does"),
    ]


async def test_each_role_is_answered_from_its_own_script_and_one_model_shows_no_split(
    settings: Settings,
) -> None:
    steps = {"steps": ["Write notes.md"]}
    model = ScriptedRoles(
        planner=[ScriptedTurn(calls=[ScriptedCall("propose_plan", steps)])],
        executor=[
            ScriptedTurn(calls=[ScriptedCall("write_file", {"path": "notes.md", "content": "x"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Notes written."})]),
        ],
    )
    app = await build(settings, model=model)
    try:
        await app.start()
        chat = Chat(app)
        await chat.mention("write notes")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        assert (await chat.snapshot()).status.lifecycle is Lifecycle.DONE
        shown = chat.out.getvalue()
    finally:
        await app.close()

    assert [r.role for r in model.requests] == ["planner", "executor", "executor"]
    assert [len(model.of(role).requests) for role in ("planner", "executor", "expert")] == [1, 2, 0]
    # No role model set: every role asks the bot's model (the model's own default).
    assert {r.model for r in model.requests} == {None}
    # One model answered every role: the footer is one line, with no split by role.
    footer = footer_of(chat, "✅ Notes written.")
    after = shown[shown.index(footer) + len(footer) :].splitlines()[1:]
    assert not any(line.strip().startswith("— ") for line in after), shown


# --- settings ----------------------------------------------------------------------------


def test_each_role_s_model_comes_from_its_nearest_layer(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("THREADBOT_PLANNER_MODEL", "claude-plans")
    s = layered(
        Settings(database_url="memory://"),
        model="claude-bot",
        slack={
            TEAM_ID: {
                "expert_model": "claude-expert",
                "channels": {CHANNEL: {"executor_model": "claude-builds", "model": "claude-ch"}},
            }
        },
    )
    layers = s.layers()
    builds = layers.at("slack", TEAM_ID, CHANNEL).engine_settings(EngineSettings())
    assert [builds.model_of(r) for r in ("planner", "executor", "expert")] == [
        "claude-plans",  # the bot's, from the environment
        "claude-builds",  # the channel's own
        "claude-expert",  # the workspace's
    ]
    docs = layers.at("slack", TEAM_ID, OTHER).engine_settings(EngineSettings())
    # The executor takes the model here (the bot's: the model's own default, None).
    assert [docs.model_of(r) for r in ("planner", "executor", "expert")] == [
        "claude-plans",
        None,
        "claude-expert",
    ]
    bare = layers.at("discord", "", "").engine_settings(EngineSettings())
    assert [bare.model_of(r) for r in ("planner", "executor", "expert")] == [
        "claude-plans",
        None,  # the bot's model
        None,  # no expert
    ]


def test_settings_explain_names_each_role_s_model_and_its_layer(tmp_path: Path) -> None:
    toml = (
        'model = "claude-bot"\nexpert_model = "claude-expert"\n'
        '[slack.T0123.channels.C0456]\nexecutor_model = "claude-builds"\n'
    )
    done = explain_channel(
        tmp_path,
        toml=toml,
        THREADBOT_PLANNER_MODEL="claude-plans",
    )
    assert done.returncode == 0, done.stderr
    lines = {line.split(" = ")[0]: line for line in done.stdout.splitlines() if " = " in line}
    assert lines["planner_model"] == (
        "planner_model = 'claude-plans'  (bot settings (THREADBOT_PLANNER_MODEL))"
    )
    assert lines["executor_model"] == "executor_model = 'claude-builds'  (slack channel C0456)"
    assert (
        lines["expert_model"] == "expert_model = 'claude-expert'  (bot settings (threadbot.toml))"
    )

    elsewhere = threadbot(tmp_path, "settings", "explain", "--platform", "discord", toml=toml)
    assert "executor_model = (none: model)  (defaults)" in elsewhere.stdout
    assert "planner_model = (none: model)  (defaults)" in elsewhere.stdout


def test_a_dollar_budget_needs_a_price_for_every_role_s_model(settings: Settings) -> None:
    priced = (
        '[prices."claude-test"]\ninput = 3\noutput = 15\ncache_read = 0.3\ncache_write = 3.75\n'
    )
    hint = '(add [prices."<model>"] with input, output, cache_read and cache_write)'
    # The bot's planner and executor, and a channel's expert, without a price ...
    toml = 'model = "claude-test"\nconversation_budget_usd = 5\n'
    toml += f'planner_model = "claude-plans"\nexecutor_model = "claude-does"\n{priced}'
    toml += f'[slack.{TEAM_ID}.channels.{OTHER}]\nexpert_model = "claude-expert"\n'
    assert refused(toml) == [
        "threadbot settings: a budget in dollars needs a price for every model; none for "
        f"['claude-does', 'claude-expert', 'claude-plans'] {hint}"
    ]
    # ... and a workspace's planner with a channel's budget.
    toml = f'model = "claude-test"\n{priced}[slack.{TEAM_ID}]\nplanner_model = "claude-plans"\n'
    toml += f"[slack.{TEAM_ID}.channels.{OTHER}]\nchannel_daily_budget_usd = 2\n"
    assert refused(toml) == [
        "threadbot settings: a budget in dollars needs a price for every model; none for "
        f"['claude-plans'] {hint}"
    ]


# --- calls made before roles were kept ---------------------------------------------------


async def test_calls_recorded_before_migration_0012_are_kept_with_no_role(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    await _in_thread(upgrade, db, "0011")
    at = "2026-12-01 10:00:00.000000"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "insert into conversations (id, platform, workspace, channel, thread, "
            "requester_id, requester_name, lifecycle, position, plan_version, "
            "workspace_dir, created_at, updated_at) values ('c1', 'slack', 'T1', 'C1', "
            "'1.0', 'U1', 'alice', 'done', 'answered', 1, 'w', ?, ?)",
            (at, at),
        )
        conn.execute(
            "insert into model_calls (conversation_id, model, input_tokens, output_tokens, "
            "cache_read_tokens, cache_write_tokens, created_at) "
            "values ('c1', 'claude-test', 100, 10, 0, 0, ?)",
            (at,),
        )
    await _in_thread(upgrade, db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("select model, role from model_calls").fetchall() == [
            ("claude-test", None)
        ]
    store = SqlStore(engine=create_engine(f"sqlite+aiosqlite:///{db}"), render=render_event)
    try:
        (line,) = await store.usage.report("role")
    finally:
        await store.close()
    assert (line.key, line.calls, line.tokens) == ("(none)", 1, 110)


async def _in_thread(function: Any, *args: Any) -> None:
    """``function(*args)`` in a thread (:func:`tests.migration_crashes.upgrade` runs its
    own event loop)."""
    await asyncio.to_thread(function, *args)
