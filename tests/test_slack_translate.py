"""Slack payloads in, neutral events out; neutral actions in, Web API calls out.

Inbound tests run on the real-shaped fixtures in ``tests/fixtures/slack/`` (one
conversation in C0PROJ0001 rooted at ts 1717171717.000100: Alice mentions the bot,
the bot posts a plan, Alice approves, answers a question, edits it, stops) and on
variants of them.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from adapters.slack.outbound import ApiCall, escape, feedback_block, render, seed_reactions
from adapters.slack.translate import (
    BotIdentity,
    action_event,
    command_event,
    inbound_event,
    unescape,
)
from conversations.actions import FeedbackButton, decode
from conversations.events import (
    AddReaction,
    Author,
    Button,
    ButtonPressed,
    CommandInvoked,
    MessagePosted,
    PlatformRef,
    PostReply,
    ReactionChanged,
    UpdateMessage,
)
from conversations.feedback import FEEDBACK_BUTTONS

FIXTURES = Path(__file__).parent / "fixtures" / "slack"
ME = BotIdentity(
    user_id="U0AGTBOT01", bot_id="B0AGTBOT01", app_id="A0AGT00001", team_id="T0AGT00001"
)
TEAM, CHANNEL, DM = "T0AGT00001", "C0PROJ0001", "D0AGTDM001"
ALICE = Author(id="U0ALICE001", name="<@U0ALICE001>")
ROOT_TS, PLAN_TS, REPLY_TS = "1717171717.000100", "1717171720.000200", "1717171740.000400"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def body(name: str) -> dict[str, Any]:
    """The payload of a fixture, a fresh copy to change."""
    payload: dict[str, Any] = copy.deepcopy(fixture(name)["payload"])
    return payload


def message_body(**event: Any) -> dict[str, Any]:
    """An Events API body around a ``message`` event in the project channel."""
    base = {"type": "message", "channel": CHANNEL, "channel_type": "channel", "ts": REPLY_TS}
    return {
        "type": "event_callback",
        "team_id": TEAM,
        "event_id": "Ev0SYNTH001",
        "event": {**base, **event},
    }


def ref(**fields: Any) -> PlatformRef:
    return PlatformRef(**{"platform": "slack", "workspace": TEAM, "channel": CHANNEL, **fields})


# --- messages ---------------------------------------------------------------------


def test_a_mention_in_a_channel_starts_a_conversation() -> None:
    event = inbound_event(body("app_mention"), ME)

    assert event == MessagePosted(
        delivery_key=f"slack:{TEAM}:{CHANNEL}:{ROOT_TS}",
        ref=ref(thread=None, message=ROOT_TS, user=ALICE.id),
        author=ALICE,
        text="please fix the flaky login test",
        mentions_bot=True,
    )


def test_the_socket_mode_mention_is_the_same_event_as_the_http_one() -> None:
    envelope = body("socket_mode_app_mention")
    assert envelope["type"] == "events_api"

    assert inbound_event(envelope["payload"], ME) == inbound_event(body("app_mention"), ME)


def test_a_direct_message_to_the_bot_starts_a_conversation_without_a_mention() -> None:
    event = inbound_event(body("message_im"), ME)

    assert isinstance(event, MessagePosted)
    assert event.mentions_bot
    assert event.ref == ref(channel=DM, message="1717171800.000500", user=ALICE.id)
    assert event.text == "can you summarize the open TODOs in the repo?"
    assert event.delivery_key == f"slack:{TEAM}:{DM}:1717171800.000500"


def test_a_reply_in_the_thread_is_a_message_of_that_thread() -> None:
    event = inbound_event(body("message_thread_reply"), ME)

    assert event == MessagePosted(
        delivery_key=f"slack:{TEAM}:{CHANNEL}:{REPLY_TS}",
        ref=ref(thread=ROOT_TS, message=REPLY_TS, user=ALICE.id),
        author=ALICE,
        text="Yes, use the staging database for the repro.",
        mentions_bot=False,
    )


def test_the_mention_and_the_message_event_of_one_message_share_a_delivery_key() -> None:
    mention = body("app_mention")
    message = body("app_mention")
    message["event"].update(type="message", channel_type="channel")
    message["event_id"] = "Ev0AGT0MSG99"
    retry = body("app_mention")
    retry["event_id"] = "Ev0AGT0RETRY"

    events = [inbound_event(b, ME) for b in (mention, message, retry)]

    assert all(isinstance(e, MessagePosted) and e.mentions_bot for e in events)
    assert len({e.delivery_key for e in events if e}) == 1
    assert len({e.text for e in events if isinstance(e, MessagePosted)}) == 1


@pytest.mark.parametrize(
    "text",
    [
        "<@U0AGTBOT01> look at this",
        "hey <@U0AGTBOT01> look at this",
        "<@U0AGTBOT01|agent-bot> look at this",
    ],
)
def test_a_plain_message_mentioning_the_bot_mentions_it(text: str) -> None:
    event = inbound_event(message_body(user=ALICE.id, text=text), ME)

    assert isinstance(event, MessagePosted)
    assert event.mentions_bot
    assert event.text in {"look at this", "hey look at this"}


def test_a_mention_of_someone_else_does_not_mention_the_bot() -> None:
    event = inbound_event(message_body(user=ALICE.id, text="<@U0BOB00001> over to you"), ME)

    assert isinstance(event, MessagePosted)
    assert not event.mentions_bot
    assert event.text == "<@U0BOB00001> over to you"


def test_slack_escapes_are_undone_in_the_text() -> None:
    text = "is a &lt; b &amp;&amp; c &gt; d? &amp;lt; stays"
    event = inbound_event(message_body(user=ALICE.id, text=text), ME)

    assert isinstance(event, MessagePosted)
    assert event.text == "is a < b && c > d? &lt; stays"
    assert unescape("&amp;gt;") == "&gt;"


@pytest.mark.parametrize("subtype", ["thread_broadcast", "file_share"])
def test_a_broadcast_or_file_reply_is_a_message(subtype: str) -> None:
    event = inbound_event(
        message_body(subtype=subtype, user=ALICE.id, text="see attached", thread_ts=ROOT_TS),
        ME,
    )

    assert isinstance(event, MessagePosted)
    assert event.ref.thread == ROOT_TS
    assert event.text == "see attached"
    assert event.author == ALICE


# --- what is ignored ---------------------------------------------------------------


def test_the_bots_own_message_echoed_back_is_ignored() -> None:
    assert inbound_event(body("message_from_self"), ME) is None


@pytest.mark.parametrize(
    "identity",
    [
        {"user": "U0AGTBOT01"},
        {"user": "U0SOMEONE1", "bot_id": "B0AGTBOT01"},
        {"user": "U0SOMEONE1", "app_id": "A0AGT00001"},
        {"user": "U0SOMEONE1", "bot_profile": {"app_id": "A0AGT00001", "name": "agent-bot"}},
    ],
)
def test_the_bots_own_message_is_ignored_whichever_field_says_so(
    identity: dict[str, Any],
) -> None:
    payload = message_body(text="Plan (v1)", thread_ts=ROOT_TS, **identity)

    assert inbound_event(payload, ME, allow_bots=True) is None


def test_an_edit_is_ignored_even_when_it_adds_a_mention() -> None:
    edit = body("message_changed")
    assert inbound_event(edit, ME) is None

    edit["event"]["message"]["text"] = "<@U0AGTBOT01> actually, use prod"
    assert inbound_event(edit, ME) is None


def test_an_edit_of_the_bots_own_message_is_ignored() -> None:
    edit = body("message_changed")
    edit["event"]["message"].update(user="U0AGTBOT01", bot_id="B0AGTBOT01")

    assert inbound_event(edit, ME, allow_bots=True) is None


@pytest.mark.parametrize("subtype", ["message_deleted", "channel_join", "bot_add", "me_message"])
def test_other_subtypes_are_ignored(subtype: str) -> None:
    payload = message_body(subtype=subtype, user=ALICE.id, text="<@U0AGTBOT01> hi")

    assert inbound_event(payload, ME) is None


def test_the_url_verification_handshake_is_not_an_event() -> None:
    handshake = body("url_verification")

    assert inbound_event(handshake, ME) is None
    assert action_event(handshake, ME) is None


def test_another_bots_message_only_counts_when_bots_are_allowed() -> None:
    other = message_body(
        user="U0OTHBOT01",
        bot_id="B0OTHBOT01",
        bot_profile={"app_id": "A0OTHAPP01", "name": "ci-bot"},
        text="<@U0AGTBOT01> build 42 failed",
    )

    assert inbound_event(other, ME) is None
    event = inbound_event(other, ME, allow_bots=True)
    assert isinstance(event, MessagePosted)
    assert event.author == Author(id="U0OTHBOT01", name="<@U0OTHBOT01>", is_bot=True)
    assert event.mentions_bot
    assert event.text == "build 42 failed"


def test_a_classic_bot_message_has_only_a_bot_id() -> None:
    classic = message_body(
        subtype="bot_message", bot_id="B0CLASSIC1", username="deploy-hook", text="deployed"
    )

    assert inbound_event(classic, ME) is None
    event = inbound_event(classic, ME, allow_bots=True)
    assert isinstance(event, MessagePosted)
    assert event.author == Author(id="B0CLASSIC1", name="deploy-hook", is_bot=True)
    assert event.ref.user == "B0CLASSIC1"


@pytest.mark.parametrize("missing", ["user", "text", "ts", "channel"])
def test_a_message_missing_a_field_is_ignored(missing: str) -> None:
    payload = body("message_thread_reply")
    del payload["event"][missing]

    assert inbound_event(payload, ME) is None


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"type": "event_callback"},
        {"type": "event_callback", "team_id": TEAM, "event": "not a dict"},
        {"type": "event_callback", "team_id": TEAM, "event": {}},
        message_body(user=ALICE.id, text=42),
        message_body(user=ALICE.id, text="hi", ts=1717171740.0004),
        {"type": "event_callback", "team_id": TEAM, "event": {"type": "reaction_added"}},
        {"type": "event_callback", "team_id": TEAM, "event": {"type": "team_join"}},
    ],
)
def test_malformed_bodies_give_none_without_raising(payload: dict[str, Any]) -> None:
    assert inbound_event(payload, ME) is None


# --- reactions --------------------------------------------------------------------


def test_a_reaction_on_the_plan_is_an_approval_candidate() -> None:
    event = inbound_event(body("reaction_added"), ME)

    assert event == ReactionChanged(
        delivery_key="slack:event:Ev0AGT0RCT01",
        ref=ref(thread=None, message=PLAN_TS, user=ALICE.id),
        author=ALICE,
        emoji="white_check_mark",
        added=True,
    )


def test_a_removed_reaction_says_so() -> None:
    event = inbound_event(body("reaction_removed"), ME)

    assert isinstance(event, ReactionChanged)
    assert not event.added
    assert event.emoji == "white_check_mark"
    assert event.delivery_key == "slack:event:Ev0AGT0RCT03"
    assert event.ref.message == PLAN_TS


def test_a_skin_tone_is_dropped_from_the_reaction() -> None:
    payload = body("reaction_added")
    payload["event"]["reaction"] = "+1::skin-tone-3"

    event = inbound_event(payload, ME)

    assert isinstance(event, ReactionChanged)
    assert event.emoji == "+1"


def test_the_bots_own_reaction_is_ignored() -> None:
    payload = body("reaction_added")
    payload["event"]["user"] = ME.user_id

    assert inbound_event(payload, ME) is None


def test_a_reaction_on_a_file_or_without_an_event_id_is_ignored() -> None:
    on_file = body("reaction_added")
    on_file["event"]["item"] = {"type": "file", "file": "F0FILE0001"}
    no_id = body("reaction_added")
    del no_id["event_id"]

    assert inbound_event(on_file, ME) is None
    assert inbound_event(no_id, ME) is None


# --- slash commands ---------------------------------------------------------------


def test_stop_over_http_is_a_command_without_a_thread() -> None:
    data = fixture("slash_command_stop")
    raw = {k: v[0] for k, v in parse_qs(data["payload"], keep_blank_values=True).items()}
    assert raw == data["payload_parsed"]

    event = command_event(raw, ME)

    assert event == CommandInvoked(
        delivery_key="slack:command:7200000000002.7200000000003.fakefakefakefakefakefakefakefake",
        ref=ref(thread=None, message=None, user=ALICE.id),
        author=ALICE,
        name="stop",
        args="",
    )


def test_stop_over_socket_mode_is_the_same_command() -> None:
    envelope = body("socket_mode_slash_command")
    assert envelope["type"] == "slash_commands"

    event = command_event(envelope["payload"], ME)

    assert isinstance(event, CommandInvoked)
    assert (event.name, event.args, event.ref) == ("stop", "", ref(user=ALICE.id))
    assert event.delivery_key == (
        "slack:command:1111111111111.2222222222222.fakefakefakefakefakefakefakefake"
    )


def test_a_command_keeps_its_arguments_and_needs_its_fields() -> None:
    form = dict(fixture("slash_command_stop")["payload_parsed"], text=" 1717171717.000100 ")
    event = command_event(form, ME)
    assert isinstance(event, CommandInvoked)
    assert event.args == "1717171717.000100"

    for field in ("command", "channel_id", "user_id", "trigger_id"):
        broken = {k: v for k, v in form.items() if k != field}
        assert command_event(broken, ME) is None, field


# --- buttons ----------------------------------------------------------------------


def test_a_click_on_approve_is_a_button_press_on_the_plan_message() -> None:
    data = fixture("block_actions_approve")
    form = parse_qs(data["payload"])
    payload = json.loads(form["payload"][0])
    assert payload == data["payload_parsed"]

    event = action_event(payload, ME)

    assert event == ButtonPressed(
        delivery_key="slack:action:1717171790123.1111111111.0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        ref=ref(thread=ROOT_TS, message=PLAN_TS, user=ALICE.id),
        author=ALICE,
        action="plan:1",
    )


def test_a_click_on_the_feedback_buttons_carries_the_pressed_side_s_action() -> None:
    """Slack hands back the pressed side's ``value``: the serialised action, read as is."""
    data = fixture("block_actions_feedback")
    payload = json.loads(parse_qs(data["payload"])["payload"][0])
    assert payload == data["payload_parsed"]

    event = action_event(payload, ME)

    bob = Author(id="U0BOB00001", name="<@U0BOB00001>")
    assert event == ButtonPressed(
        delivery_key="slack:action:1717171795123.2222222222.1b2c3d4e5f60718293a4b5c6d7e8f90a",
        ref=ref(thread=ROOT_TS, message="1717171760.000500", user=bob.id),
        author=bob,
        action='tb1:{"k":"feedback","p":true}',
    )
    assert decode(event.action) == FeedbackButton(positive=True)
    # and what the bot posted is what Slack showed: the same element under the answer
    block = payload["message"]["blocks"][-1]
    assert feedback_block(FEEDBACK_BUTTONS) == {
        "type": "context_actions",
        "elements": block["elements"],
    }


def test_the_socket_mode_click_is_the_same_button_press() -> None:
    envelope = body("socket_mode_block_actions")
    assert envelope["type"] == "interactive"

    expected = action_event(fixture("block_actions_approve")["payload_parsed"], ME)
    assert action_event(envelope["payload"], ME) == expected


def test_a_button_press_falls_back_to_action_id_action_ts_and_the_container() -> None:
    payload = copy.deepcopy(fixture("block_actions_approve")["payload_parsed"])
    del payload["actions"][0]["value"]
    del payload["trigger_id"]
    del payload["channel"]
    del payload["message"]

    event = action_event(payload, ME)

    assert isinstance(event, ButtonPressed)
    assert event.action == "approve"
    assert event.delivery_key == "slack:action:1717171790.123456"
    assert event.ref == ref(thread=ROOT_TS, message=PLAN_TS, user=ALICE.id)


def test_a_button_payload_missing_what_it_needs_is_ignored() -> None:
    base = fixture("block_actions_approve")["payload_parsed"]
    no_actions = dict(base, actions=[])
    other_type = dict(base, type="view_submission")
    no_user = {k: v for k, v in base.items() if k != "user"}

    assert action_event(no_actions, ME) is None
    assert action_event(other_type, ME) is None
    assert action_event(no_user, ME) is None


# --- identity ---------------------------------------------------------------------


def test_the_identity_comes_from_auth_test() -> None:
    answer = {
        "ok": True,
        "team": "Fake",
        "user": "agent-bot",
        "team_id": TEAM,
        "user_id": "U0AGTBOT01",
        "bot_id": "B0AGTBOT01",
    }

    assert BotIdentity.from_auth_test(answer, app_id="A0AGT00001") == ME


# --- rendering --------------------------------------------------------------------

THREAD = ref(thread=ROOT_TS)
FENCE = re.compile(r"^ {0,3}`{3,}[^`\n]*$", re.MULTILINE)


def test_a_plan_with_two_buttons_is_one_message_and_its_reactions_come_after() -> None:
    plan = PostReply(
        ref=THREAD,
        text="📋 Plan (v1)\n1. Run the login tests ten times\n2. Fix the race",
        buttons=(
            Button(label="Approve", action="approve:req-1", style="primary"),
            Button(label="Reject", action="reject:req-1", style="danger"),
        ),
        reactions=("white_check_mark", "x"),
    )

    calls = render(plan, idempotency_key="outbox-17")

    assert calls == [
        ApiCall(
            "chat.postMessage",
            {
                "channel": CHANNEL,
                "thread_ts": ROOT_TS,
                "text": plan.text,
                "blocks": [
                    {"type": "section", "text": {"type": "mrkdwn", "text": plan.text}},
                    {
                        "type": "actions",
                        "elements": [
                            {
                                "type": "button",
                                "action_id": 'tb1:{"k":"approve","r":"req-1"}',
                                "value": 'tb1:{"k":"approve","r":"req-1"}',
                                "text": {"type": "plain_text", "text": "Approve", "emoji": True},
                                "style": "primary",
                            },
                            {
                                "type": "button",
                                "action_id": 'tb1:{"k":"reject","r":"req-1"}',
                                "value": 'tb1:{"k":"reject","r":"req-1"}',
                                "text": {"type": "plain_text", "text": "Reject", "emoji": True},
                                "style": "danger",
                            },
                        ],
                    },
                ],
                "metadata": {
                    "event_type": "threadbot_outbox",
                    "event_payload": {"key": "outbox-17", "part": 0},
                },
                "unfurl_links": False,
            },
        )
    ]
    assert seed_reactions(plan, CHANNEL, PLAN_TS) == [
        ApiCall("reactions.add", {"channel": CHANNEL, "timestamp": PLAN_TS, "name": name})
        for name in ("white_check_mark", "x")
    ]


def long_answer_with_code(size: int) -> str:
    parts: list[str] = []
    n = 0
    while sum(len(p) + 2 for p in parts) < size:
        n += 1
        if n % 3 == 0:
            lines = 150 if n == 6 else 12
            body = "\n".join(f"    result_{i} = run(step={i})  # n={n}" for i in range(lines))
            parts.append(f"```python\n{body}\n```")
        else:
            parts.append(
                " ".join(f"Sentence {n}.{i} about the flaky login test." for i in range(9))
            )
    return "\n\n".join(parts)


def content(text: str) -> str:
    """The text without fence lines and whitespace: what splitting must keep."""
    return re.sub(r"\s+", "", FENCE.sub("", text))


def balanced(text: str) -> bool:
    return len(FENCE.findall(text)) % 2 == 0


def test_a_long_answer_is_split_into_several_messages_that_keep_code_whole() -> None:
    answer_text = long_answer_with_code(20_000)
    assert len(answer_text) >= 20_000
    answer = PostReply(
        ref=THREAD, text=answer_text, buttons=(Button(label="Stop", action="stop:c42"),)
    )

    calls = render(answer, idempotency_key="outbox-99")

    assert len(calls) >= 6
    assert {c.method for c in calls} == {"chat.postMessage"}
    for part, call in enumerate(calls):
        text = call.args["text"]
        assert len(text) <= 3_900
        assert balanced(text)
        assert call.args["thread_ts"] == ROOT_TS
        assert call.args["metadata"]["event_payload"] == {"key": "outbox-99", "part": part}
        sections = [b for b in call.args["blocks"] if b["type"] == "section"]
        assert all(
            len(s["text"]["text"]) <= 3_000 and balanced(s["text"]["text"]) for s in sections
        )
        assert content("\n".join(s["text"]["text"] for s in sections)) == content(text)
        has_buttons = any(b["type"] == "actions" for b in call.args["blocks"])
        assert has_buttons == (part == len(calls) - 1)
    assert content("\n".join(c.args["text"] for c in calls)) == content(answer_text)
    assert any(c.args["text"].startswith("```python\n") for c in calls[1:])


def test_an_ephemeral_reply_goes_to_one_person_and_takes_no_reactions() -> None:
    notice = PostReply(
        ref=THREAD,
        text="Only the requester or an approver can approve this plan.",
        ephemeral_to="U0BOB00001",
        reactions=("x",),
    )

    assert render(notice, idempotency_key="outbox-3") == [
        ApiCall(
            "chat.postEphemeral",
            {
                "channel": CHANNEL,
                "thread_ts": ROOT_TS,
                "text": notice.text,
                "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": notice.text}}],
                "user": "U0BOB00001",
            },
        )
    ]
    assert seed_reactions(notice, CHANNEL, "1717171799.000900") == []


def test_a_top_level_post_has_no_thread_ts() -> None:
    (call,) = render(PostReply(ref=ref(), text="hello"), idempotency_key="k")

    assert "thread_ts" not in call.args


def test_an_update_replaces_text_and_buttons() -> None:
    status = UpdateMessage(
        ref=ref(thread=ROOT_TS, message="1717171750.000700"),
        text="⏳ step 2 of 3 · 4 tool calls",
        buttons=(Button(label="Stop", action="stop:c42", style="danger"),),
    )

    (call,) = render(status, idempotency_key="outbox-5")

    assert call == ApiCall(
        "chat.update",
        {
            "channel": CHANNEL,
            "ts": "1717171750.000700",
            "text": status.text,
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": status.text}},
                {
                    "type": "actions",
                    "elements": [
                        {
                            "type": "button",
                            "action_id": 'tb1:{"k":"stop","c":"c42"}',
                            "value": 'tb1:{"k":"stop","c":"c42"}',
                            "text": {"type": "plain_text", "text": "Stop", "emoji": True},
                            "style": "danger",
                        }
                    ],
                },
            ],
        },
    )
    (done,) = render(UpdateMessage(ref=status.ref, text="✅ done"), idempotency_key="outbox-6")
    assert done.args["blocks"] == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "✅ done"}}
    ]


def test_an_update_too_long_for_one_message_is_cut() -> None:
    long_text = "word " * 2_000
    (call,) = render(
        UpdateMessage(ref=ref(message=PLAN_TS), text=long_text), idempotency_key="outbox-7"
    )

    assert len(call.args["text"]) <= 3_900
    assert call.args["text"].endswith("\n…")


def test_a_reaction_is_reactions_add_with_the_slack_name() -> None:
    calls = render(
        AddReaction(ref=ref(thread=ROOT_TS, message=PLAN_TS), emoji=":+1::skin-tone-2:"),
        idempotency_key="outbox-8",
    )

    assert calls == [
        ApiCall("reactions.add", {"channel": CHANNEL, "timestamp": PLAN_TS, "name": "+1"})
    ]


def test_an_update_or_reaction_without_a_message_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ref\.message"):
        render(AddReaction(ref=THREAD, emoji="x"), idempotency_key="k")
    with pytest.raises(ValueError, match=r"ref\.message"):
        render(UpdateMessage(ref=THREAD, text="t"), idempotency_key="k")


def test_text_is_escaped_but_mentions_and_links_survive() -> None:
    text = (
        "if a < b && c > d: ping <@U0ALICE001> in <#C0PROJ0001>, "
        "see <https://x.test/a?b=1|the run> &amp; <!date^1392734382^{date}|Feb 18>"
    )

    assert escape(text) == (
        "if a &lt; b &amp;&amp; c &gt; d: ping <@U0ALICE001> in <#C0PROJ0001>, "
        "see <https://x.test/a?b=1|the run> &amp; <!date^1392734382^{date}|Feb 18>"
    )
    (call,) = render(PostReply(ref=THREAD, text="a < b"), idempotency_key="k")
    assert call.args["text"] == "a &lt; b"


@pytest.mark.parametrize(
    "broadcast", ["<!here>", "<!channel>", "<!everyone>", "<!subteam^S0123|devs>", "<!here|here>"]
)
def test_the_models_words_never_ping_the_channel(broadcast: str) -> None:
    """A broadcast in the text (the model's words, maybe from a tool's output) is shown,
    escaped, and notifies nobody."""
    (call,) = render(PostReply(ref=THREAD, text=f"done {broadcast}"), idempotency_key="k")
    shown = call.args["text"]
    assert "<!" not in shown
    assert shown == "done " + broadcast.replace("<", "&lt;").replace(">", "&gt;")


def test_many_buttons_and_long_labels_fit_slacks_limits() -> None:
    buttons = tuple(
        Button(label=f"Allow call {i} " + "x" * 80, action=f"allow:r1:{i}") for i in range(30)
    )

    (call,) = render(PostReply(ref=THREAD, text="🔐 May I?", buttons=buttons), idempotency_key="k")

    actions = [b for b in call.args["blocks"] if b["type"] == "actions"]
    assert [len(b["elements"]) for b in actions] == [25, 5]
    labels = [e["text"]["text"] for b in actions for e in b["elements"]]
    assert all(len(label) <= 75 for label in labels)
    assert all("style" not in e for b in actions for e in b["elements"])


def test_render_refuses_limits_below_twenty() -> None:
    with pytest.raises(ValueError):
        render(PostReply(ref=THREAD, text="hi"), idempotency_key="k", max_section=10)
