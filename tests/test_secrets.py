"""Secrets never reach the journal, the model, the thread or the logs (issue 14, "Secrets").

The redactor on its own (whole texts, a token split across chunks, nested and
overlapping secrets, a secret at the very end); the engine with a redactor (a tool
that prints a token: the journal's tool result, the tool record, the progress note,
the model's next request and the posted note hold ``[redacted NAME]``); the
deliverer with a redactor (every text a platform gets, however it was written); the
whole app with a token read through ``THREADBOT_SLACK_BOT_TOKEN_FILE``; and bad
``THREADBOT_*_FILE`` settings stopping the bot with exit 2, without the secret.
"""

from __future__ import annotations

import functools
import io
import itertools
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import bot.app
import bot.engines
from bot.settings import Settings
from conversations.errors import DeliveryError
from conversations.events import Button, PlanCard, PlanTask, PlatformRef, PostReply
from conversations.outbox import Deliverer
from conversations.render import render_event
from conversations.store import Outgoing
from conversations.store.memory import MemoryStore
from core.models.base import ToolKind, ToolSpec
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.run.engine import Engine
from core.secrets import RedactingFilter, Redactor
from core.tools.base import Tool, Toolbox, ToolContext, ToolOutput
from core.tools.control import control_tools
from core.vocabulary.entries import ToolResultEntry
from core.vocabulary.inputs import ThreadMessage
from core.vocabulary.people import Person
from core.vocabulary.snapshot import ConversationSnapshot
from core.workflows import default_workflow
from tests.harness import Chat
from tests.test_cli import _run
from tests.test_outbox import RecordingSender

TOKEN = "xoxb-1111-2222-abcdefABCDEF"
KEY = "sk-ant-api03-0123456789"
SECRETS = {"SLACK_BOT_TOKEN": TOKEN, "ANTHROPIC_API_KEY": KEY}
ALICE = Person(id="console:alice", name="alice")


# --- the redactor --------------------------------------------------------------------


def test_every_occurrence_is_replaced_by_its_name() -> None:
    redactor = Redactor(SECRETS)
    text = f"env: SLACK_BOT_TOKEN={TOKEN}\nANTHROPIC_API_KEY={KEY} again {TOKEN}"
    assert redactor.redact(text) == (
        "env: SLACK_BOT_TOKEN=[redacted SLACK_BOT_TOKEN]\n"
        "ANTHROPIC_API_KEY=[redacted ANTHROPIC_API_KEY] again [redacted SLACK_BOT_TOKEN]"
    )


def test_a_secret_inside_a_longer_one_leaves_no_trace_of_either() -> None:
    inner = TOKEN[5:20]  # the longer secret holds it whole
    redactor = Redactor({"INNER": inner, "OUTER": TOKEN})
    assert redactor.redact(f"a {TOKEN} b {inner} c") == "a [redacted OUTER] b [redacted INNER] c"


def test_overlapping_secrets_show_no_character_of_either() -> None:
    redactor = Redactor({"A": "AAAAbbbbCCCC", "B": "CCCCddddEEEE"})
    assert redactor.redact("x AAAAbbbbCCCCddddEEEE y") == "x [redacted A][redacted B] y"


def test_short_and_empty_values_are_not_redacted() -> None:
    redactor = Redactor({"SHORT": "1234567", "EMPTY": "", "TOKEN": TOKEN})
    assert redactor.redact(f"1234567 {TOKEN}") == "1234567 [redacted TOKEN]"
    assert not Redactor({"SHORT": "1234567", "EMPTY": ""})


def test_without_secrets_text_and_chunks_pass_as_they_are() -> None:
    redactor = Redactor()
    assert not redactor
    text = "nothing secret here"
    assert redactor.redact(text) is text
    stream = redactor.stream()
    assert stream.feed("abc") == "abc"
    assert stream.finish() == ""


def test_a_token_split_across_two_chunks_is_redacted() -> None:
    stream = Redactor(SECRETS).stream()
    first = stream.feed(f"token={TOKEN[:9]}")
    assert first == "token="  # the token's beginning is held back
    assert stream.feed(f"{TOKEN[9:]} done\n") == "[redacted SLACK_BOT_TOKEN] done\n"
    assert stream.finish() == ""


def test_a_secret_at_the_very_end_comes_out_at_finish() -> None:
    redactor = Redactor(SECRETS)
    stream = redactor.stream()
    released = stream.feed(f"key is {KEY}")
    assert KEY not in released
    assert released + stream.finish() == "key is [redacted ANTHROPIC_API_KEY]"
    assert stream.feed(KEY[:-1]) + stream.finish() == KEY[:-1]  # not a secret: shown at the end


def test_text_that_cannot_start_a_secret_is_released_at_once() -> None:
    stream = Redactor(SECRETS).stream()
    assert stream.feed("make: all done\n") == "make: all done\n"
    assert stream.feed("xo") == ""  # may be the start of the Slack token
    assert stream.held == 2
    assert stream.feed("xo") == "xo"  # "xoxo" is not
    assert stream.held == 2


def test_a_stream_cut_anywhere_gives_what_redact_gives_and_holds_little() -> None:
    secrets = {"A": "AAAAbbbbCCCC", "B": "CCCCddddEEEE", "C": "bbbbCCCC", "D": "AAAAAAAA"}
    redactor = Redactor(secrets)
    text = "AAAAAAAAAbbbbCCCCddddEEEE+bbbbCCCC AAAAbbbbCCC AAAAbbbbCCCCdd!"
    whole = redactor.redact(text)
    assert not any(s in whole for s in secrets.values())
    for cuts in itertools.combinations(range(1, len(text)), 2):
        stream = redactor.stream()
        released = ""
        for start, end in itertools.pairwise((0, *cuts, len(text))):
            released += stream.feed(text[start:end])
            assert stream.held <= redactor.longest - 1
        assert released + stream.finish() == whole, cuts


def test_log_records_lose_secrets_in_their_message_args_and_traceback() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(RedactingFilter(Redactor(SECRETS)))
    log = logging.getLogger("tests.secrets.child")
    log.addHandler(handler)
    try:
        log.warning("connecting with %s", TOKEN)
        try:
            raise RuntimeError(f"refused key {KEY}")
        except RuntimeError:
            log.exception("the model call failed")
    finally:
        log.removeHandler(handler)
    written = out.getvalue()
    assert "connecting with [redacted SLACK_BOT_TOKEN]" in written
    assert "RuntimeError: refused key [redacted ANTHROPIC_API_KEY]" in written
    assert TOKEN not in written and KEY not in written


# --- the engine: tool output is redacted before it is stored --------------------------


class Leaky:
    """A read-only tool whose output, note and (on demand) error hold the token."""

    def __init__(self, *, fails: bool = False) -> None:
        name = "leak_error" if fails else "leak"
        self.spec = ToolSpec(
            name=name,
            description="prints env",
            input_schema={"type": "object"},
            kind=ToolKind.READ_ONLY,
        )
        self.fails = fails

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        if self.fails:
            raise RuntimeError(f"bad token {TOKEN}")
        return ToolOutput(
            content=f"SLACK_BOT_TOKEN={TOKEN}\n", note=f"printed {TOKEN[:4]}{TOKEN[4:]}"
        )


def leaks(snap: ConversationSnapshot) -> list[ToolResultEntry]:
    """The tool results in ``snap``'s journal but the ``finish`` call's."""
    return [
        r.entry
        for r in snap.journal
        if isinstance(r.entry, ToolResultEntry)
        and snap.tool_calls[r.entry.tool_use_id].name != "finish"
    ]


async def redacting_engine(
    store: MemoryStore, tmp_path: Path, model: ScriptedModel, *tools: Tool
) -> tuple[Engine, str]:
    """An engine with the bot's secrets (:data:`SECRETS`) and a new conversation on ``store``."""
    cid = await store.threads.open_conversation(
        delivery_key="m1",
        binding=PlatformRef(platform="test", channel="c", thread="m1"),
        requester=ALICE,
        workspace_root=tmp_path,
        position=default_workflow().start,
    )
    assert cid is not None
    engine = Engine(
        journal=store.journal,
        model=model,
        toolbox=Toolbox([*control_tools(), *tools]),
        redactor=Redactor(SECRETS),
    )
    return engine, cid


async def test_a_token_in_tool_output_is_redacted_in_journal_note_request_and_thread(
    tmp_path: Path,
) -> None:
    store = MemoryStore(render=render_event)
    sender = RecordingSender()  # the deliverer redacts nothing here: the engine must
    deliverer = Deliverer(outbox=store.outbox, senders={"test": sender}, note_interval=0)
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("leak", {}), ScriptedCall("leak_error", {})]),
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "I looked."})]),
        ]
    )
    engine, cid = await redacting_engine(store, tmp_path, model, Leaky(), Leaky(fails=True))

    await engine.start(cid, ThreadMessage(text="print the env", author=ALICE))
    await deliverer.drain()

    snap = await store.journal.load(cid)
    results = leaks(snap)
    assert sorted(r.content for r in results) == [  # the two calls run side by side
        "SLACK_BOT_TOKEN=[redacted SLACK_BOT_TOKEN]\n",
        "The tool crashed: RuntimeError('bad token [redacted SLACK_BOT_TOKEN]')",
    ]
    assert TOKEN not in snap.model_dump_json()  # journal, tool records, requests
    second = model.requests[1]
    assert "SLACK_BOT_TOKEN=[redacted SLACK_BOT_TOKEN]" in repr(second.messages)
    assert TOKEN not in repr(second.messages)
    posted = sender.texts()
    assert any("⏳ printed [redacted SLACK_BOT_TOKEN]" in text for text in posted), posted
    assert not any(TOKEN in text for text in posted)


async def test_a_token_a_person_pastes_is_redacted_before_it_is_journaled_or_sent(
    tmp_path: Path,
) -> None:
    store = MemoryStore(render=render_event)
    model = ScriptedModel(
        [ScriptedTurn(calls=[ScriptedCall("finish", {"answer": "Never paste a token."})])]
    )
    engine, cid = await redacting_engine(store, tmp_path, model)

    await engine.start(cid, ThreadMessage(text=f"why does {TOKEN} fail?", author=ALICE))

    snap = await store.journal.load(cid)
    assert TOKEN not in snap.model_dump_json()
    assert "why does [redacted SLACK_BOT_TOKEN] fail?" in repr(model.requests[0].messages)
    assert TOKEN not in repr(model.requests[0].messages)


# --- the deliverer: nothing a platform gets holds a secret ----------------------------


async def redacting_deliverer(
    tmp_path: Path,
) -> tuple[MemoryStore, RecordingSender, Deliverer, PlatformRef, str]:
    """A deliverer with a redactor of :data:`SECRETS`, sending to a recording sender,
    and one conversation in a thread (its binding and id) to enqueue rows for."""
    store = MemoryStore(render=render_event)
    sender = RecordingSender()
    deliverer = Deliverer(
        outbox=store.outbox, senders={}, note_interval=0, redactor=Redactor(SECRETS)
    )
    deliverer.add_sender(sender)
    binding = PlatformRef(platform="test", channel="c", thread="t")
    cid = await store.threads.open_conversation(
        delivery_key="k",
        binding=binding,
        requester=ALICE,
        workspace_root=tmp_path,
        position="executing",
    )
    assert cid is not None
    return store, sender, deliverer, binding, cid


async def test_every_text_a_platform_gets_is_redacted_however_it_was_written(
    tmp_path: Path,
) -> None:
    store, sender, deliverer, binding, cid = await redacting_deliverer(tmp_path)
    # A notice enqueued by the hub, then a message the platform refuses quoting the token.
    await store.outbox.enqueue(cid, [Outgoing(PostReply(ref=binding, text=f"note {TOKEN}"))])
    await deliverer.drain()
    sender.refuse(DeliveryError(f"invalid_auth for {TOKEN}", permanent=True))
    await store.outbox.enqueue(cid, [Outgoing(PostReply(ref=binding, text=f"key {KEY}"))])
    await deliverer.drain()
    await deliverer.send_now(PostReply(ref=binding, text=f"nothing to stop, {TOKEN}"))

    assert sender.texts()[0] == "note [redacted SLACK_BOT_TOKEN]"
    assert sender.texts()[-1] == "nothing to stop, [redacted SLACK_BOT_TOKEN]"
    report = sender.texts()[1]  # the "could not post" report quotes the message and error
    assert report.startswith("⚠️ I could not post a message here (“key [redacted ANTHROPIC")
    assert report.endswith(
        "invalid_auth for [redacted SLACK_BOT_TOKEN]. Trying again cannot help, so I will not."
    )
    refused = sender.calls[1][0]
    assert getattr(refused, "text", "") == "key [redacted ANTHROPIC_API_KEY]"
    assert not any(TOKEN in t or KEY in t for t in sender.texts())


async def test_a_secret_in_a_buttons_label_or_a_plan_cards_steps_is_redacted(
    tmp_path: Path,
) -> None:
    """A question's options and a plan's steps are the model's words: on buttons and on
    a card they lose the secret as the text does (a fresh tester saw one on a button)."""
    store, sender, deliverer, binding, cid = await redacting_deliverer(tmp_path)
    option = Button(label=f"2) use {TOKEN}", action='tb1:{"k":"choose","r":"q1","o":1}')
    card = PlanCard(
        title=f"Plan {TOKEN}", version=1, tasks=(PlanTask(title=f"send {KEY}"),), note=TOKEN
    )
    posted = PostReply(ref=binding, text="❓ which?", buttons=(option,), plan=card)
    await store.outbox.enqueue(cid, [Outgoing(posted)])
    await deliverer.drain()

    [(sent, *_)] = sender.calls
    assert isinstance(sent, PostReply) and sent.plan is not None
    assert [b.label for b in sent.buttons] == ["2) use [redacted SLACK_BOT_TOKEN]"]
    assert sent.buttons[0].action == option.action  # the value is threadbot's own
    assert sent.plan.title == "Plan [redacted SLACK_BOT_TOKEN]"
    assert [t.title for t in sent.plan.tasks] == ["send [redacted ANTHROPIC_API_KEY]"]
    assert sent.plan.note == "[redacted SLACK_BOT_TOKEN]"
    assert TOKEN not in repr(sent) and KEY not in repr(sent)


# --- the app: a token read from a file, redacted in the thread -------------------------


async def test_a_token_from_threadbot_slack_bot_token_file_is_redacted_in_the_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "slack_bot_token"
    token_file.write_text(f"  {TOKEN}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    monkeypatch.setenv("THREADBOT_SLACK_BOT_TOKEN_FILE", str(token_file))
    assert Settings.unknown_variables({"THREADBOT_SLACK_BOT_TOKEN_FILE": "x"}) == []
    settings = Settings(
        database_url="memory://",
        workspace_root=tmp_path / "workspaces",
        progress_interval=0,
        console_user="alice",
    )
    assert settings.slack_bot_token is not None
    assert settings.slack_bot_token.get_secret_value() == TOKEN
    assert settings.secrets() == {"SLACK_BOT_TOKEN": TOKEN}
    # The wiring of build() (bot/engines.py, bot/app.py): one redactor for the engine and
    # the deliverer.
    redactor = Redactor(settings.secrets())
    monkeypatch.setattr(bot.engines, "Engine", functools.partial(Engine, redactor=redactor))
    monkeypatch.setattr(bot.app, "Deliverer", functools.partial(Deliverer, redactor=redactor))
    model = ScriptedModel(
        [
            ScriptedTurn(calls=[ScriptedCall("leak", {})]),
            # a model quoting what it was told
            ScriptedTurn(calls=[ScriptedCall("finish", {"answer": f"The token is {TOKEN}."})]),
        ]
    )
    app = await bot.app.build(
        settings, model=model, toolbox=Toolbox([*bot.engines.default_toolbox(), Leaky()])
    )
    try:
        chat = Chat(app)
        await app.start()
        await chat.mention(f"what is the token? it starts {TOKEN[:8]}")
        shown = chat.out.getvalue()
        assert "printed [redacted SLACK_BOT_TOKEN]" in shown
        assert "✅ The token is [redacted SLACK_BOT_TOKEN]." in shown
        assert TOKEN not in shown
        snap = await chat.snapshot()
        results = leaks(snap)
        assert [r.content for r in results] == ["SLACK_BOT_TOKEN=[redacted SLACK_BOT_TOKEN]\n"]
    finally:
        await app.close()


# --- bad THREADBOT_*_FILE settings: exit 2, the secret never shown ----------------------


def test_a_missing_secret_file_stops_the_bot_naming_the_variable(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = _run(tmp_path, {"THREADBOT_DISCORD_TOKEN_FILE": str(missing)}, "")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "threadbot: bad settings:",
        f"  THREADBOT_DISCORD_TOKEN_FILE: cannot read {missing}: No such file or directory",
    ]


def test_a_secret_set_both_ways_stops_the_bot_without_showing_either(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("xoxb-from-the-file-999999\n")
    env = {"SLACK_BOT_TOKEN": TOKEN, "THREADBOT_SLACK_BOT_TOKEN_FILE": str(token_file)}
    result = _run(tmp_path, env, "")
    assert result.returncode == 2
    assert (
        "  THREADBOT_SLACK_BOT_TOKEN_FILE: set either SLACK_BOT_TOKEN or "
        "THREADBOT_SLACK_BOT_TOKEN_FILE, not both"
    ) in result.stderr.splitlines()
    assert TOKEN not in result.stderr + result.stdout
    assert "from-the-file" not in result.stderr + result.stdout


def test_an_empty_or_unreadable_secret_file_stops_the_bot(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text(" \n")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe-secret-bytes")
    env = {
        "THREADBOT_ANTHROPIC_API_KEY_FILE": str(empty),
        "THREADBOT_SLACK_APP_TOKEN_FILE": str(binary),
        "THREADBOT_SLACK_SIGNING_SECRET_FILE": str(tmp_path),  # a directory
    }
    result = _run(tmp_path, env, "")
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert f"  THREADBOT_ANTHROPIC_API_KEY_FILE: {empty} is empty" in lines
    assert f"  THREADBOT_SLACK_APP_TOKEN_FILE: {binary} is not UTF-8 text" in lines
    assert f"  THREADBOT_SLACK_SIGNING_SECRET_FILE: cannot read {tmp_path}: Is a directory" in lines
    assert "secret-bytes" not in result.stderr


def test_a_secret_file_is_a_known_setting_and_read(tmp_path: Path) -> None:
    key_file = tmp_path / "anthropic_key"
    key_file.write_text(KEY)
    env = {"THREADBOT_ANTHROPIC_API_KEY_FILE": str(key_file)}
    result = _run(tmp_path, env, "", "settings", "explain", "--platform", "console")
    assert result.returncode == 0, result.stderr
    assert KEY not in result.stdout + result.stderr


def test_the_installs_keys_come_from_threadbot_token_keys_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cryptography.fernet import Fernet

    key = Fernet.generate_key().decode()
    keys_file = tmp_path / "token_keys"
    keys_file.write_text(f"{key}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("THREADBOT_TOKEN_KEYS", raising=False)
    monkeypatch.setenv("THREADBOT_TOKEN_KEYS_FILE", str(keys_file))
    assert Settings.unknown_variables({"THREADBOT_TOKEN_KEYS_FILE": "x"}) == []
    settings = Settings(database_url="memory://", workspace_root=tmp_path / "workspaces")
    assert settings.token_keys is not None
    assert settings.token_keys.get_secret_value() == key

    both = {"THREADBOT_TOKEN_KEYS": key, "THREADBOT_TOKEN_KEYS_FILE": str(keys_file)}
    result = _run(tmp_path, both, "")
    assert result.returncode == 2
    assert (
        "  THREADBOT_TOKEN_KEYS_FILE: set either THREADBOT_TOKEN_KEYS or "
        "THREADBOT_TOKEN_KEYS_FILE, not both"
    ) in result.stderr.splitlines(), result.stderr
    assert key not in result.stderr + result.stdout
