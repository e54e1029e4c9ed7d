"""Mentions read from the platforms' structure: Slack rich text, Discord's mentions list.

Pure tests of :mod:`adapters.slack.mentions`, :mod:`adapters.discord.mentions` and
the markup reader they share (:mod:`adapters.markup`), through the translators, on
the fixtures with the content changed. The stories with the real SDKs are in
``tests/test_slack_bad_input.py`` and ``tests/test_discord_bad_input.py``.
"""

from __future__ import annotations

import pytest

from adapters.discord.translate import message_event
from adapters.markup import QuoteMarkers, hidden_spans
from adapters.slack.translate import inbound_event
from tests.translation_cases import DISCORD_ME, SLACK_ME, discord_body, slack_body

SLACK_BOT = f"<@{SLACK_ME.user_id}>"
DISCORD_BOT = f"<@{DISCORD_ME.user_id}>"


def slack_message(text: str, *, blocks: list[object] | None = None) -> dict[str, object]:
    """The ``app_mention`` fixture with ``text``, and ``blocks`` (none when None)."""
    body = slack_body("app_mention")
    body["event"]["text"] = text
    if blocks is None:
        del body["event"]["blocks"]
    else:
        body["event"]["blocks"] = blocks
    return body


@pytest.mark.parametrize(
    ("text", "mentioned", "said"),
    [
        (f"{SLACK_BOT} fix it", True, "fix it"),
        (f"{SLACK_BOT[:-1]}|agent-bot> fix it", True, "fix it"),
        (f"```{SLACK_BOT} fix it```", False, f"```{SLACK_BOT} fix it```"),
        (f"run `{SLACK_BOT}` now", False, f"run `{SLACK_BOT}` now"),
        (f"&gt; {SLACK_BOT} fix it", False, f"> {SLACK_BOT} fix it"),
        (f"they said\n&gt;&gt;&gt; hi\n{SLACK_BOT} fix it", False, None),
        (f"```{SLACK_BOT}```\n{SLACK_BOT} fix it", True, f"```{SLACK_BOT}```\nfix it"),
        (f"`unclosed {SLACK_BOT} fix it", True, "`unclosed fix it"),
    ],
)
def test_slack_without_blocks_reads_the_mrkdwn_text(
    text: str, mentioned: bool, said: str | None
) -> None:
    event = inbound_event(slack_message(text), SLACK_ME)
    assert event is not None and event.kind == "message_posted"
    assert event.mentions_bot is mentioned
    if said is not None:
        assert event.text == said


def test_slack_blocks_decide_over_the_text() -> None:
    section = {"type": "rich_text_section", "elements": [{"type": "text", "text": "fix it"}]}
    blocks = [{"type": "rich_text", "elements": [section]}]
    event = inbound_event(slack_message(f"{SLACK_BOT} fix it", blocks=blocks), SLACK_ME)
    assert event is not None and event.kind == "message_posted" and not event.mentions_bot


def test_slack_a_mention_in_a_list_counts() -> None:
    user = {"type": "user", "user_id": SLACK_ME.user_id}
    section = {"type": "rich_text_section", "elements": [user]}
    items = {"type": "rich_text_list", "elements": [section]}
    blocks = [{"type": "rich_text", "elements": [items]}]
    event = inbound_event(slack_message(f"- {SLACK_BOT}", blocks=blocks), SLACK_ME)
    assert event is not None and event.kind == "message_posted" and event.mentions_bot


def test_a_dm_is_for_the_bot_whatever_it_holds() -> None:
    body = slack_body("message_im")
    body["event"]["text"] = f"```{SLACK_BOT}```"
    event = inbound_event(body, SLACK_ME)
    assert event is not None and event.kind == "message_posted" and event.mentions_bot


@pytest.mark.parametrize(
    ("content", "mentioned"),
    [
        (f"{DISCORD_BOT} fix it", True),
        (f"<@!{DISCORD_ME.user_id}> fix it", True),
        ("", True),  # listed, content withheld (no Message Content intent)
        ("fix it", True),  # listed with no token: a reply that pings the bot
        (f"```\n{DISCORD_BOT}\n```", False),
        (f"`{DISCORD_BOT}`", False),
        (f"> {DISCORD_BOT} fix it", False),
        (f">>> quote\n\n{DISCORD_BOT}", False),
        (f">{DISCORD_BOT} no space: not a quote", True),
        (f"> quoted\n{DISCORD_BOT} fix it", True),
    ],
)
def test_discord_mentions_list_unless_code_or_quotes_hide_it(content: str, mentioned: bool) -> None:
    d = discord_body("message_create_mention_bot")
    d["content"] = content
    event = message_event(d, DISCORD_ME, thread_ids=frozenset())
    assert event is not None and event.mentions_bot is mentioned


def test_discord_not_in_the_mentions_list_is_no_mention_whatever_the_text() -> None:
    d = discord_body("message_create_mention_bot")
    d["mentions"] = []
    d["content"] = f"{DISCORD_BOT} fix it"
    event = message_event(d, DISCORD_ME, thread_ids=frozenset())
    assert event is not None and not event.mentions_bot


def test_discord_a_bot_role_hidden_in_code_is_no_mention() -> None:
    role = "1198930054348931090"
    d = discord_body("message_create_mention_bot")
    d.update(mentions=[], mention_roles=[role], content=f"`<@&{role}>` is its role")
    event = message_event(d, DISCORD_ME, thread_ids=frozenset(), bot_roles={role})
    assert event is not None and not event.mentions_bot
    d["content"] = f"<@&{role}> fix it"
    event = message_event(d, DISCORD_ME, thread_ids=frozenset(), bot_roles={role})
    assert event is not None and event.mentions_bot and event.text == "fix it"


def test_the_markup_reader_on_long_and_odd_text() -> None:
    quotes = QuoteMarkers(line=("> ",), rest=(">>> ",))
    assert hidden_spans("`" * 50_001, quotes) == []
    text = "`a` " * 20_000
    assert len(hidden_spans(text, quotes)) == 20_000
    assert hidden_spans("```\n> not a quote\n```", quotes) == [(0, 21)]
