"""Feedback on an answer (issue 32), on each platform against its local fake.

Alice asks, approves the plan and gets the answer; under it are the feedback buttons
(Slack: a ``feedback_buttons`` element in a ``context_actions`` block; Discord: 👍
and 👎 buttons; the console has no buttons and takes a 👍 / 👎 reaction on the answer).
Bob, who is in the channel, presses 👍: it is stored with the conversation under his
platform user id and acknowledged to him alone (Slack ``chat.postEphemeral``, Discord
an ephemeral interaction response, flags 64; the console ``(only to bob)``), and
nothing is posted in the thread. His 👎 afterwards replaces his 👍; Alice's 👍 counts
beside it; ``threadbot usage --by conversation --json`` shows one of each. Around it:
a press whose answer's link was pruned counts for its thread, a 👍 on the plan still
approves and is no feedback, and the usage table's feedback column.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.outbound import FEEDBACK_ACTION_ID
from bot.settings import Settings
from bot.usage_report import as_table, with_feedback
from conversations.actions import FeedbackButton, decode
from conversations.events import ButtonPressed
from conversations.feedback import FEEDBACK_BUTTONS
from conversations.store.feedback import FeedbackCounts
from conversations.store.usage import UsageLine
from core.models.scripted import ScriptedModel
from core.vocabulary.lifecycle import Lifecycle
from tests.fakes.discord_api import MSG_FLAG_EPHEMERAL
from tests.platform_threads import (
    PEOPLE,
    ConsoleThread,
    DiscordThread,
    SlackThread,
    Thread,
    on,
)
from tests.slack_harness import CHANNEL
from tests.test_discord_story import buttons
from tests.test_slack_story import finish, plan
from tests.test_usage_report import usage

ANSWER = "The login test is fixed."
DEFERRED_EPHEMERAL = {"type": 5, "data": {"flags": MSG_FLAG_EPHEMERAL}}
"""Discord's first answer to a feedback button: an ephemeral "thinking..." (type 5)."""


def user_id(thread: Thread, who: str) -> str:
    """The platform user id of ``who`` (the console's is ``console:<name>``)."""
    return f"console:{who}" if isinstance(thread, ConsoleThread) else PEOPLE[_platform(thread)][who]


def _platform(thread: Thread) -> str:
    return "slack" if isinstance(thread, SlackThread) else "discord"


def feedback_values(thread: Thread, answer: str) -> dict[bool, str]:
    """``{positive: value}`` of the feedback buttons under the answer, as the platform
    holds them (the value each hands back when pressed)."""
    if isinstance(thread, SlackThread):
        held = thread.ws.api.message(CHANNEL, answer)
        assert held is not None
        [block] = [b for b in held["blocks"] if b["type"] == "context_actions"]
        assert held["blocks"][-1] == block  # under the answer's text
        [element] = block["elements"]
        assert (element["type"], element["action_id"]) == ("feedback_buttons", FEEDBACK_ACTION_ID)
        assert all(
            element[side]["text"]["type"] == "plain_text"
            for side in ("positive_button", "negative_button")
        )
        values = [element["positive_button"]["value"], element["negative_button"]["value"]]
    else:
        assert isinstance(thread, DiscordThread)
        shown = buttons(thread.g.fake.messages[answer])
        values = [shown["👍"], shown["👎"]]
    actions = [decode(value) for value in values]
    assert actions == [FeedbackButton(positive=True), FeedbackButton(positive=False)]
    return {True: values[0], False: values[1]}


async def give(thread: Thread, answer: str, *, positive: bool, by: str) -> Any:
    """``by`` gives feedback on the answer: presses its button (the console: reacts
    👍 or 👎); returns what identifies the press (Discord: the interaction)."""
    if isinstance(thread, ConsoleThread):
        await thread.chat.react(answer, "+1" if positive else "-1", by=by)
        await thread.settle()
        return None
    value = feedback_values(thread, answer)[positive]
    if isinstance(thread, SlackThread):
        held = thread.ws.api.message(CHANNEL, answer)
        assert held is not None
        await thread.ws.press(held, value, by=PEOPLE["slack"][by])
        return None
    press = thread._as(thread.g.interaction_d("interaction_create_button", thread.thread), by)
    press["message"] = copy.deepcopy(thread.g.fake.messages[answer])
    press["data"] = {"custom_id": value, "component_type": 2}
    await thread.g.dispatch("INTERACTION_CREATE", press)
    return thread.g.fake.interactions[str(press["id"])]


def acknowledged_alone(thread: Thread, press: Any, who: str, *, positive: bool) -> None:
    """The last acknowledgement went to ``who`` alone, thanking them by name."""
    thumb = "👍" if positive else "👎"
    if isinstance(thread, SlackThread):
        ack = thread.ws.api.ephemerals[-1]
        assert (ack["user"], ack["channel"], ack.get("thread_ts")) == (
            PEOPLE["slack"][who],
            CHANNEL,
            thread.root,
        )
        text = ack["text"]
    elif isinstance(thread, DiscordThread):
        assert press.callbacks == [DEFERRED_EPHEMERAL]
        message = thread.g.fake.messages[press.original_message_id]
        assert int(message["flags"]) & MSG_FLAG_EPHEMERAL
        text = message["content"]
    else:
        last = thread.chat.out.getvalue().splitlines()[-1]
        assert f"threadbot (only to {who}): " in last
        text = last
    assert f"{thumb} Thanks, " in text and "your feedback is noted" in text


@pytest.mark.parametrize("platform", ["slack", "discord", "console"])
async def test_feedback_is_stored_per_person_told_to_them_alone_and_reported(
    platform: str, sqlite_settings: Settings, tmp_path: Path
) -> None:
    async with on(platform, sqlite_settings, ScriptedModel([plan(), finish(ANSWER)])) as thread:
        await thread.mention("please fix the flaky login test")
        await thread.react(thread.message("📋 Plan"), True, "alice")
        await thread.settle()
        assert (await thread.snapshot()).status.lifecycle is Lifecycle.DONE
        answer = thread.message(ANSWER)
        if isinstance(thread, ConsoleThread):
            assert thread.shown(answer).buttons == []  # a reaction gives feedback here
        else:
            feedback_values(thread, answer)  # the two buttons, under the answer
        [conversation] = await thread.app.store.threads.conversations()
        feedback = thread.app.store.feedback
        posts = thread.posts()

        # Bob, not the requester, may give feedback: stored, told to him alone.
        press = await give(thread, answer, positive=True, by="bob")
        assert [(f.user_id, f.positive) for f in await feedback.of(conversation.id)] == [
            (user_id(thread, "bob"), True)
        ]
        acknowledged_alone(thread, press, "bob", positive=True)

        # His later press replaces his earlier one.
        press = await give(thread, answer, positive=False, by="bob")
        assert [(f.user_id, f.positive) for f in await feedback.of(conversation.id)] == [
            (user_id(thread, "bob"), False)
        ]
        acknowledged_alone(thread, press, "bob", positive=False)

        # Alice's counts beside his.
        press = await give(thread, answer, positive=True, by="alice")
        given = {f.user_id: f.positive for f in await feedback.of(conversation.id)}
        assert given == {user_id(thread, "bob"): False, user_id(thread, "alice"): True}
        acknowledged_alone(thread, press, "alice", positive=True)
        assert thread.posts() == posts  # nothing was said in the thread
        assert (await thread.snapshot()).status.lifecycle is Lifecycle.DONE

    report = usage(tmp_path, sqlite_settings, "--by", "conversation")
    [line] = [line for line in report["lines"] if line["key"] == conversation.id]
    assert line["feedback"] == {"positive": 1, "negative": 1}
    assert report["total"]["feedback"] == {"positive": 1, "negative": 1}


async def test_a_press_whose_answer_is_no_longer_known_counts_for_its_thread(
    settings: Settings,
) -> None:
    """The link from a message to its conversation goes with its pruned outbox row; a
    feedback press there still reaches the conversation of the thread. A 👍 on a
    message that asks for something (the plan) approves, as before, and is no feedback."""
    async with on("console", settings, ScriptedModel([plan(), finish(ANSWER)])) as thread:
        assert isinstance(thread, ConsoleThread)
        chat = thread.chat
        await chat.mention("please fix the flaky login test")
        await chat.react(thread.message("📋 Plan"), "+1", by="alice")
        await thread.settle()
        assert (await thread.snapshot()).status.lifecycle is Lifecycle.DONE
        [conversation] = await thread.app.store.threads.conversations()
        assert await thread.app.store.feedback.of(conversation.id) == []

        press = ButtonPressed(
            delivery_key="press-1",
            ref=chat._ref("999", "bob"),  # a message the store knows nothing of
            author=chat.person("bob"),
            action=FEEDBACK_BUTTONS[1].value,
        )
        await thread.app.hub.handle(press)
        await thread.settle()

        [given] = await thread.app.store.feedback.of(conversation.id)
        assert (given.user_id, given.positive) == ("console:bob", False)


def test_the_usage_table_by_conversation_has_a_feedback_column() -> None:
    line = UsageLine("c1", 2, 100, 10, 0, 0, 0, 2)
    counts = {"c1": FeedbackCounts(2, 1), "c2": FeedbackCounts(0, 1)}

    lines = with_feedback([line], counts)  # c2: feedback, no model call

    assert [(shown.key, shown.calls) for shown in lines] == [("c1", 2), ("c2", 0)]
    head, first, second, last, *_ = as_table("conversation", lines, counts).splitlines()
    assert head.split()[-1] == "👍/👎"
    assert (first.split()[-1], second.split()[-1], last.split()[-1]) == ("2/1", "0/1", "2/2")
    assert "👍/👎" not in as_table("model", [line])
