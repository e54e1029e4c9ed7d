"""Issue 16, acceptance 3: files shared in the thread reach the model.

On Slack (the real bolt app and slack-sdk against FakeSlackApi, the real Anthropic
client against the local Messages API fake) and on Discord (the real discord.py
against FakeDiscord, a scripted model), a person shares a screenshot and a log in the
thread: the model's request carries the image as an image block and the log as text;
the fakes served the files, Slack's only with the bot token and Discord's with no token
at all; a file on a foreign host (a second local server) is refused, and that host
received nothing; after a restart of the bot, the next request sends the same content,
byte for byte; a file over the cap is said in the thread; a file shared while the run
works reaches the model as a note.
"""

from __future__ import annotations

import asyncio
import base64
import copy
from typing import Any

from bot.settings import Settings
from core.models.anthropic import anthropic_model_from
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.vocabulary.entries import UserText
from tests.fakes.anthropic_server import FakeAnthropicServer, tool_use
from tests.fakes.files import FakeFileHost, png
from tests.fakes.slack_api import BOT_USER_ID
from tests.slack_harness import _INBOUND_TASKS, ALICE, CHANNEL, WAIT, Workspace, slack_workspace
from tests.test_cache_prefix import canonical, unmarked
from tests.test_discord_story import Guild, discord_guild, fixture
from tests.test_slack_story import finish, plan, question

LOG = "===== 2 failed, 10 passed =====\nFAILED tests/test_login.py::test_session - KeyError\n"
IMAGE = png(64, 48)


def image_block(data: bytes) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(data).decode(),
        },
    }


def texts(content: list[dict[str, Any]]) -> list[str]:
    return [b["text"] for b in content if b.get("type") == "text"]


# --- Slack ---------------------------------------------------------------------------------


async def share_on_slack(
    ws: Workspace, text: str, files: list[dict[str, Any]], *, thread: str | None = None
) -> str:
    """Alice shares ``files`` with ``text``: a mention at the top of the channel (both the
    ``app_mention`` and the ``file_share`` message event), or a ``file_share`` reply in
    ``thread``. Returns the message ts; does not wait for the hub."""
    said = f"<@{BOT_USER_ID}> {text}" if thread is None else text
    ts = str(ws.api.add_message(CHANNEL, said, user=ALICE, thread_ts=thread, files=files)["ts"])
    message = ws.message_body(ts, said, thread=thread)
    message["event"].update(subtype="file_share", files=copy.deepcopy(files), upload=False)
    if thread is None:
        mention = ws.mention_body(ts, said)
        mention["event"]["files"] = copy.deepcopy(files)
        await ws.deliver("events_api", mention)
    await ws.deliver("events_api", message)
    return ts


async def handed_over(ws: Workspace) -> None:
    """Wait until bolt's listeners have handed every delivery to the hub (not for runs)."""
    async with asyncio.timeout(WAIT):
        while pending := [
            t
            for t in asyncio.all_tasks()
            if not t.done() and getattr(t.get_coro(), "__name__", "") in _INBOUND_TASKS
        ]:
            await asyncio.wait(pending)


async def test_slack_a_screenshot_and_a_log_reach_the_model_and_a_restart_sends_the_same(
    sqlite_settings: Settings,
) -> None:
    steps = {"steps": ["Read the log", "Fix the session fixture"]}
    script = [
        [tool_use("toolu_01", "propose_plan", steps)],
        [tool_use("toolu_02", "finish", {"answer": "Fixed the fixture."})],
    ]
    async with FakeAnthropicServer(script) as server, FakeFileHost() as foreign:
        model = anthropic_model_from(api_key="k", base_url=server.base_url, model="claude-test")
        try:
            async with slack_workspace(sqlite_settings, model) as ws:  # type: ignore[arg-type]
                elsewhere = foreign.serve("/files-pri/T0AGT00001-F9/download/other.png", IMAGE)
                files = [
                    ws.api.share_file("login-failure.png", IMAGE, mimetype="image/png"),
                    ws.api.share_file("pytest.log", LOG.encode(), mimetype="text/plain"),
                    ws.api.share_file("other.png", IMAGE, mimetype="image/png", url=elsewhere),
                ]
                root = await share_on_slack(ws, "the login test fails, see these", files)
                await ws.settle()
                plan_message = ws.post(root, "📋 Plan (v1)")
                downloads = list(ws.api.downloads)

            async with slack_workspace(sqlite_settings, model) as ws:  # type: ignore[arg-type]
                ws.api.add_message(CHANNEL, **plan_message)  # Slack still has it
                await ws.react(plan_message["ts"], "white_check_mark")  # after the restart
                ws.post(root, "✅ Fixed the fixture.")
                assert ws.api.downloads == []  # nothing fetched again: the journal has it
        finally:
            await model.aclose()

    first, second = (r.body for r in server.requests)
    shared = first["messages"][0]["content"]
    assert image_block(IMAGE) in unmarked(shared)
    assert f'<file name="pytest.log">\n{LOG}\n</file>' in texts(shared)[2]
    assert texts(shared)[3] == (
        f"[<@{ALICE}> shared other.png (image/png, {len(IMAGE)} bytes); couldn't fetch it: it is "
        f"on {foreign.root_url}, not on a host threadbot takes Slack files from]"
    )
    assert texts(shared)[-1] == f"<@{ALICE}>: the login test fails, see these"
    assert foreign.requests == []  # the foreign host received nothing, token or not
    assert [(d.path.rsplit("/", 1)[-1], d.authorization) for d in downloads] == [
        ("login-failure.png", "Bearer xoxb-test"),
        ("pytest.log", "Bearer xoxb-test"),
    ]
    assert canonical(unmarked(second["messages"][0])) == canonical(unmarked(first["messages"][0]))


async def test_slack_a_file_over_the_cap_is_said_in_the_thread(settings: Settings) -> None:
    settings.shared_file_mb = 1 / 1024  # 1 KB
    settings.shared_files_per_message = 2
    model = ScriptedModel(
        [plan(), ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["x"]})])]
    )
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("look into the flaky test")
        files = [
            ws.api.share_file("small.txt", b"ok\n", mimetype="text/plain"),
            ws.api.share_file("huge.log", b"x" * 5000, mimetype="text/plain"),
            ws.api.share_file("third.txt", b"3\n", mimetype="text/plain"),
        ]
        await share_on_slack(ws, "also these", files, thread=root)
        await ws.settle()

        notice = ws.post(root, "📎")["text"]
        assert notice == (
            "📎 I can't take `huge.log` (4.9 KB): the limit is 1.0 KB a file.\n"
            "📎 I take the first 2 files of a message; I left out `third.txt`."
        )
        assert [d.path.rsplit("/", 1)[-1] for d in ws.api.downloads] == ["small.txt"]
        feedback = model.requests[-1].messages[-1]["content"]
        assert any("small.txt" in t and "ok\n" in t for t in texts(feedback))
        assert any(
            "huge.log" in t and "not fetched: larger than the 1.0 KB limit a file" in t
            for t in texts(feedback)
        )


async def test_slack_a_file_shared_while_the_run_works_reaches_it_as_a_note(
    settings: Settings,
) -> None:
    gate = asyncio.Event()
    look = ScriptedTurn(calls=[ScriptedCall("list_files", {})], gate=gate)
    model = ScriptedModel([look, plan()])
    async with slack_workspace(settings, model) as ws:
        root = await ws.mention("why does it fail?", settle=False)
        await asyncio.wait_for(look.started.wait(), WAIT)
        log = ws.api.share_file("pytest.log", LOG.encode(), mimetype="text/plain")
        await share_on_slack(ws, "here is the log", [log], thread=root)
        await handed_over(ws)  # the reply waits in the queue, its file fetched
        gate.set()
        await ws.settle()

        snap = await ws.snapshot(root)
        (note,) = [
            r.entry
            for r in snap.journal
            if isinstance(r.entry, UserText) and r.entry.role == "note"
        ]
        assert LOG in note.files[0]["text"]
        assert note.files[0] in model.requests[1].messages[-1]["content"]


# --- Discord -------------------------------------------------------------------------------


async def share_on_discord(
    g: Guild, text: str, attachments: list[dict[str, Any]], *, thread: str | None = None
) -> str:
    """Alice shares ``attachments``: a mention in the channel, or a message in ``thread``."""
    if thread is None:
        d = g.mention_d(text)
    else:
        d = fixture("message_create_with_attachments")
        d.update(id=g.fake.snowflake(), channel_id=thread, content=text)
    d["attachments"] = attachments
    await g.dispatch("MESSAGE_CREATE", d)
    return str(d["id"])


async def test_discord_attachments_reach_the_model_without_a_token_and_the_same_after_a_restart(
    sqlite_settings: Settings,
) -> None:
    model = ScriptedModel([plan(), question(), finish()])
    async with FakeFileHost() as foreign, discord_guild(sqlite_settings, model) as g:
        elsewhere = foreign.serve("/attachments/1/2/other.png", IMAGE)
        attachments = [
            g.fake.attach("login-failure.png", IMAGE, content_type="image/png"),
            g.fake.attach("pytest.log", LOG.encode(), content_type=None),  # Discord didn't say
            g.fake.attach("other.png", IMAGE, content_type="image/png", url=elsewhere),
        ]
        thread = await share_on_discord(g, "the login test fails, see these", attachments)
        plan_message = g.post(thread, "📋 Plan (v1)")

        await g.disconnect()
        await g.connect(model)  # the same database, a new process
        await g.react(thread, str(plan_message["id"]), "✅")
        g.post(thread, "❓ Staging or production database?")
        config = g.fake.attach("db.toml", b'[db]\nhost = "staging"\n', content_type="text/plain")
        await share_on_discord(g, "staging, as in this file", [config], thread=thread)
        g.post(thread, "✅ The login test is fixed.")

    first, second, third = (r.messages for r in model.requests)
    shared = first[0]["content"]
    assert image_block(IMAGE) in shared
    assert any(f'<file name="pytest.log">\n{LOG}\n</file>' in t for t in texts(shared))
    assert any(
        "other.png" in t and "not on a host threadbot takes Discord" in t for t in texts(shared)
    )
    assert foreign.requests == []
    assert [d.path.rsplit("/", 1)[-1] for d in g.fake.downloads] == [
        "login-failure.png",
        "pytest.log",
        "db.toml",
    ]
    assert all(d.authorization is None for d in g.fake.downloads)  # never the bot token
    assert canonical(second[0]) == canonical(first[0])  # after the restart: the same bytes
    assert canonical(third[0]) == canonical(first[0])
    assert any('host = "staging"' in t for t in texts(third[-1]["content"]))


async def test_discord_a_file_over_the_cap_is_said_in_the_thread(settings: Settings) -> None:
    settings.shared_file_mb = 1 / 1024
    model = ScriptedModel([plan()])
    async with discord_guild(settings, model) as g:
        huge = g.fake.attach("huge.log", b"x" * 5000, content_type="text/plain")
        thread = await share_on_discord(g, "look at this", [huge])

        assert (
            g.posts(thread)[0] == "📎 I can't take `huge.log` (4.9 KB): the limit is 1.0 KB a file."
        )
        assert g.fake.downloads == []  # Discord said its size: never fetched
        shared = model.requests[0].messages[0]["content"]
        assert any("not fetched: larger than the 1.0 KB limit a file" in t for t in texts(shared))
