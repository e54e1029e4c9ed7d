"""A bot that ran the console story and the Slack story, for the run inspector's tests.

One app on a SQLite file, with the Slack adapter against the fake Slack
(:mod:`tests.slack_harness`) and the console adapter beside it: Alice's Slack mention,
her ✅ on the plan, her answer to the question, a file written and the answer; then the
console's mention, its approval (``+✅``), a file read and the answer. Every model call
is priced, so each conversation has a cost. The inspector is served over the app's store
(:mod:`tests.inspector_harness`) while the app runs, so a test may start another run and
watch it live.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass

from adapters.console import ConsoleAdapter
from bot.settings import ModelPrice, Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from tests.inspector_harness import Served, inspector_served, with_operator
from tests.slack_harness import ALICE, Workspace, slack_workspace

PRICE = ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75)
"""Dollars per million tokens of the scripted model (100 in, 20 out a turn: 600 µ$)."""

SLACK_REQUEST = "please fix the flaky login test"
CONSOLE_REQUEST = "what does the README say about make test?"


def slack_turns() -> list[ScriptedTurn]:
    """Plan, question, a file written, the answer."""
    plan = {"steps": ["Reproduce the flaky test", "Fix the fixture"], "tools": ["write_file"]}
    ask = {"question": "Staging or production database?", "options": ["staging", "prod"]}
    write = {"path": "conftest.py", "content": "# one session per test\n"}
    return [
        ScriptedTurn(calls=[ScriptedCall("propose_plan", plan)]),
        ScriptedTurn(calls=[ScriptedCall("ask_user", ask)]),
        ScriptedTurn(text="Rewriting the fixture.", calls=[ScriptedCall("write_file", write)]),
        ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "The login test is fixed."})]),
    ]


def console_turns() -> list[ScriptedTurn]:
    """Plan, a file written and read back, the answer."""
    plan = {"steps": ["Write the notes", "Read them back"], "tools": ["write_file", "read_file"]}
    notes = {"path": "NOTES.md", "content": "make test runs the whole suite\n"}
    return [
        ScriptedTurn(calls=[ScriptedCall("propose_plan", plan)]),
        ScriptedTurn(calls=[ScriptedCall("write_file", notes)]),
        ScriptedTurn(calls=[ScriptedCall("read_file", {"path": "NOTES.md"})]),
        ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "It runs the whole suite."})]),
    ]


@dataclass
class Stories:
    """The bot after both stories: ``ws`` (its Slack side), ``model`` (add turns to run
    more), ``served`` (the inspector over its store), the two conversations' ids and the
    Slack thread's root."""

    ws: Workspace
    model: ScriptedModel
    served: Served
    slack_conversation: str
    console_conversation: str
    slack_root: str
    console_output: io.StringIO


@contextlib.asynccontextmanager
async def both_stories(settings: Settings, **inspector: object) -> AsyncIterator[Stories]:
    """Run both stories on ``settings`` (a SQLite file is used) and serve the inspector
    (``inspector``: more settings for it, e.g. ``inspector_hosts``)."""
    settings = with_operator(
        settings.model_copy(
            update={
                "database_url": f"sqlite+aiosqlite:///{settings.workspace_root.parent / 'bot.db'}",
                "prices": {"scripted": PRICE},  # the scripted model's usage names it
            }
        ),
        **inspector,
    )
    model = ScriptedModel(slack_turns())
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention(SLACK_REQUEST)
        plan = ws.post(root, "📋 Plan (v1)")
        await ws.react(plan["ts"], "white_check_mark", by=ALICE)
        await ws.reply(root, "staging, please")
        ws.post(root, "✅ The login test is fixed.")
        [slack_conversation] = await ws.conversation_ids()

        model.add(*console_turns())
        out = io.StringIO()
        console = ConsoleAdapter(
            input=io.StringIO(f"{CONSOLE_REQUEST}\n+✅ 2\n"),
            output=out,
            user="alice",
            wait_between_lines=True,
        )
        ws.app.add_sender(console)
        assert await console.run(ws.app.hub, settled=ws.app.hub.settled) == 0
        assert "✅ It runs the whole suite." in out.getvalue(), out.getvalue()
        [console_conversation] = [c for c in await ws.conversation_ids() if c != slack_conversation]

        async with inspector_served(
            ws.app.store,
            settings,
            redactor=ws.app.redactor,
            commits=ws.app.commits,
            stopper=ws.app.hub.stopper,
        ) as served:
            yield Stories(
                ws=ws,
                model=model,
                served=served,
                slack_conversation=slack_conversation,
                console_conversation=console_conversation,
                slack_root=root,
                console_output=out,
            )
