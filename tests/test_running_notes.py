"""A long command is not silence in the thread: notes say it still runs, and for how long.

The command waits for a file the test makes only once the thread has shown two "still
running" notes, so the test waits for what it expects and never for a fixed time.
"""

from __future__ import annotations

import re
from pathlib import Path

from bot.settings import Settings
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from tests.conftest import wait_for
from tests.harness import Chat

WAITS_FOR_GO = "until [ -e go ]; do sleep 0.05; done; echo built"
STILL_RUNNING = re.compile(
    r"⏳ `until \[ -e go \]; do sleep 0\.05; done; echo built` still running · (\d+)s"
)


async def test_a_long_command_is_said_to_be_still_running_until_it_ends(
    settings: Settings, make_app
) -> None:
    settings.running_note_every = 0.2
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Build it"]})]),
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": WAITS_FOR_GO})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Built."})]),
        ]
    )
    app = await make_app(model)
    await app.start()  # the deliverer sends while the run works
    chat = Chat(app)
    await chat.mention("build it")
    await chat.react(chat.bot_message("📋 Plan (v1)"))  # the run goes on in the background

    await wait_for(lambda: len(STILL_RUNNING.findall(chat.out.getvalue())) >= 2)
    workspace = Path((await chat.snapshot()).workspace)
    (workspace / "go").touch()
    await app.hub.settled()

    shown = chat.out.getvalue()
    seconds = [int(s) for s in STILL_RUNNING.findall(shown)]
    assert seconds == sorted(seconds)  # each note says how long it has run so far
    assert shown.index("still running") < shown.index("ran `until")  # then its end
    assert "✅ Built." in shown
    notes_after_the_end = STILL_RUNNING.findall(shown[shown.index("ran `until") :])
    assert notes_after_the_end == []


async def test_no_note_is_said_where_the_setting_is_0(settings: Settings, make_app) -> None:
    assert settings.running_note_every == 0  # the tests' default: threads as written
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["Wait"]})]),
            ScriptedTurn(calls=[ScriptedCall("run_command", {"command": "sleep 0.5"})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Waited."})]),
        ]
    )
    app = await make_app(model)
    chat = Chat(app)
    await chat.mention("wait")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()

    assert "✅ Waited." in chat.out.getvalue()
    assert "still running" not in chat.out.getvalue()
