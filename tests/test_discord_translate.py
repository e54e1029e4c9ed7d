"""Discord gateway payloads in, neutral events out; neutral actions in, REST calls out.

Inbound tests run on the gateway dispatch fixtures in ``tests/fixtures/discord/``
(one conversation: Alice mentions the bot in #proj, the bot starts the thread
1249999996321923072 on her message and posts its plan there, Alice approves with
a reaction and a button, answers a question in the thread, removes her reaction
and types /stop) and on variants of them.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from adapters.discord.outbound import (
    MAX_TEXT,
    RestCall,
    command_answer,
    components,
    message_nonce,
    render,
    seed_reactions,
    thread_name,
)
from adapters.discord.translate import (
    BotIdentity,
    bot_role_ids,
    content_missing,
    interaction_event,
    message_event,
    opened_in_thread,
    reaction_event,
    thread_id_of,
    thread_parent_of,
)
from conversations.actions import ApproveButton
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

FIXTURES = Path(__file__).parent / "fixtures" / "discord"
BOT = "1198930054348931074"
ME = BotIdentity(user_id=BOT, application_id=BOT)
GUILD = "1198205278617731073"
PROJ = "1198206536908931078"
THREAD = ROOT = "1249999996321923072"
PLAN = "1250000017293443072"
REPLY = "1250000151511171072"
OTHER_BOT = "1081153998028931077"
CUSTOM_EMOJI = "1202553933004931080"
ALICE = Author(id="573086210457731075", name="<@573086210457731075>")
THREADS = frozenset({THREAD})


def frame(name: str) -> dict[str, Any]:
    """The gateway frame ``{t, s, op, d}`` of a fixture, a fresh copy."""
    data = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    payload: dict[str, Any] = copy.deepcopy(data["payload"])
    return payload


def d(name: str) -> dict[str, Any]:
    """The dispatch data ``d`` of a fixture, a fresh copy to change."""
    data: dict[str, Any] = frame(name)["d"]
    return data


def ref(**fields: Any) -> PlatformRef:
    return PlatformRef(**{"platform": "discord", "workspace": GUILD, **fields})


def test_every_fixture_is_a_gateway_dispatch_frame() -> None:
    names = sorted(path.stem for path in FIXTURES.glob("*.json"))

    assert len(names) == 9
    for name in names:
        payload = frame(name)
        assert payload["op"] == 0 and isinstance(payload["s"], int)
        assert isinstance(payload["t"], str) and isinstance(payload["d"], dict)


def test_the_identity_comes_from_ready() -> None:
    ready = {"v": 10, "user": {"id": BOT, "username": "agent-bot", "bot": True}}
    ready["application"] = {"id": BOT, "flags": 0}

    assert BotIdentity.from_ready(ready) == ME
    assert BotIdentity.from_ready({"user": {"id": BOT}}) == ME
    with pytest.raises(ValueError, match=r"user\.id"):
        BotIdentity.from_ready({"application": {"id": BOT}})


# --- messages ---------------------------------------------------------------------


def test_a_mention_in_a_channel_starts_a_conversation() -> None:
    event = message_event(d("message_create_mention_bot"), ME, thread_ids=THREADS)

    assert event == MessagePosted(
        delivery_key=f"discord:message:{ROOT}",
        ref=ref(channel=PROJ, thread=None, message=ROOT, user=ALICE.id),
        author=ALICE,
        text="please fix the flaky login test",
        mentions_bot=True,
    )


def test_an_answer_in_the_thread_is_a_message_of_that_thread() -> None:
    event = message_event(d("message_create_in_thread"), ME, thread_ids=THREADS)

    assert event == MessagePosted(
        delivery_key=f"discord:message:{REPLY}",
        ref=ref(channel=THREAD, thread=THREAD, message=REPLY, user=ALICE.id),
        author=ALICE,
        text="Use staging, not prod.",
        mentions_bot=False,
    )


def test_a_thread_is_known_by_its_channel_type_when_the_runner_has_not_seen_it() -> None:
    payload = d("message_create_in_thread")

    event = message_event(payload, ME, thread_ids=())
    del payload["channel_type"]
    unknown = message_event(payload, ME, thread_ids=())
    known = message_event(payload, ME, thread_ids=THREADS)

    assert event is not None and event.ref.thread == THREAD
    assert unknown is not None and unknown.ref.thread is None
    assert known is not None and known.ref.thread == THREAD


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (f"<@{BOT}> look at this", "look at this"),
        (f"<@!{BOT}> look at this", "look at this"),
        (f"hey <@{BOT}> look at this", "hey look at this"),
        (f"look at this <@{BOT}>", "look at this"),
        (f"  <@{BOT}>\n\nlook at this  ", "look at this"),
    ],
)
def test_the_bots_mention_is_removed_from_the_text(content: str, text: str) -> None:
    payload = d("message_create_mention_bot")
    payload["content"] = content

    event = message_event(payload, ME, thread_ids=THREADS)

    assert event is not None and event.mentions_bot
    assert event.text == text


def test_the_mention_is_read_from_mentions_not_from_the_content() -> None:
    named_only = d("message_create_mention_bot")
    named_only["mentions"] = []
    listed_only = d("message_create_mention_bot")
    listed_only["content"] = ""

    named = message_event(named_only, ME, thread_ids=THREADS)
    listed = message_event(listed_only, ME, thread_ids=THREADS)

    assert named is not None and not named.mentions_bot
    assert listed is not None and listed.mentions_bot and listed.text == ""


def test_a_mention_of_someone_else_does_not_mention_the_bot() -> None:
    payload = d("message_create_mention_bot")
    payload["content"] = "<@673467649228931076> over to you"
    payload["mentions"] = [{"id": "673467649228931076", "username": "bob_fake"}]

    event = message_event(payload, ME, thread_ids=THREADS)

    assert event is not None and not event.mentions_bot
    assert event.text == "<@673467649228931076> over to you"


def test_a_mention_of_the_bots_role_mentions_the_bot() -> None:
    role = "1198930054348931999"
    guild: dict[str, Any] = {"id": GUILD, "roles": [{"id": "1", "name": "@everyone"}]}
    guild["roles"].append({"id": role, "name": "agent-bot", "tags": {"bot_id": BOT}})
    guild["roles"].append({"id": "2", "name": "other-bot", "tags": {"bot_id": OTHER_BOT}})
    payload = d("message_create_mention_bot")
    payload.update(content=f"<@&{role}> please fix it", mentions=[], mention_roles=[role])

    roles = bot_role_ids(guild, ME)
    event = message_event(payload, ME, thread_ids=THREADS, bot_roles=roles)
    without = message_event(payload, ME, thread_ids=THREADS)

    assert roles == {role}
    assert event is not None and event.mentions_bot and event.text == "please fix it"
    assert without is not None and not without.mentions_bot


def test_a_reply_to_a_message_is_a_message() -> None:
    payload = d("message_create_in_thread")
    payload["type"] = 19
    payload["message_reference"] = {"type": 0, "message_id": PLAN, "channel_id": THREAD}

    event = message_event(payload, ME, thread_ids=THREADS)

    assert event is not None and event.text == "Use staging, not prod."


def test_the_author_is_named_by_mention_whatever_name_they_chose() -> None:
    """A nickname may be anything (another person's id, ``@everyone``): texts that
    address the author use the mention, which Discord shows as their name."""
    nick = d("message_create_in_thread")
    nick["member"]["nick"] = "773086210457731079"
    plain = d("message_create_in_thread")
    plain["author"]["global_name"] = "@everyone"

    named = message_event(nick, ME, thread_ids=THREADS)
    bare = message_event(plain, ME, thread_ids=THREADS)

    assert named is not None and named.author == ALICE
    assert bare is not None and bare.author == ALICE


def test_a_direct_message_starts_a_conversation_without_a_mention() -> None:
    payload = d("message_create_in_thread")
    for field in ("guild_id", "member", "position"):
        del payload[field]
    payload.update(channel_id="1250000000000000001", channel_type=1)

    event = message_event(payload, ME, thread_ids={"1250000000000000001"})

    assert event == MessagePosted(
        delivery_key=f"discord:message:{REPLY}",
        ref=PlatformRef(
            platform="discord",
            workspace="",
            channel="1250000000000000001",
            message=REPLY,
            user=ALICE.id,
        ),
        author=ALICE,
        text="Use staging, not prod.",
        mentions_bot=True,
    )


# --- what is ignored ---------------------------------------------------------------


def test_the_bots_own_message_echoed_back_is_ignored() -> None:
    payload = d("message_create_own_bot_message")

    assert message_event(payload, ME, thread_ids=THREADS) is None
    assert message_event(payload, ME, thread_ids=THREADS, allow_bots=True) is None


def other_bots_message() -> dict[str, Any]:
    payload = d("message_create_own_bot_message")
    payload["author"].update(id=OTHER_BOT, username="ci-bot", global_name=None)
    payload["content"] = "build 812 failed"
    return payload


def test_another_bots_message_is_ignored_unless_bots_are_allowed() -> None:
    payload = other_bots_message()

    ignored = message_event(payload, ME, thread_ids=THREADS)
    allowed = message_event(payload, ME, thread_ids=THREADS, allow_bots=True)

    assert ignored is None
    assert allowed is not None
    assert allowed.author == Author(id=OTHER_BOT, name=f"<@{OTHER_BOT}>", is_bot=True)
    assert allowed.ref == ref(channel=THREAD, thread=THREAD, message=PLAN, user=OTHER_BOT)
    assert allowed.text == "build 812 failed"


def test_a_webhook_message_is_ignored_even_when_bots_are_allowed() -> None:
    payload = other_bots_message()
    payload["webhook_id"] = OTHER_BOT

    assert message_event(payload, ME, thread_ids=THREADS, allow_bots=True) is None


@pytest.mark.parametrize("kind", [6, 7, 18, 20, 21, 23, 46])
def test_system_and_command_messages_are_ignored(kind: int) -> None:
    payload = d("message_create_in_thread")
    payload["type"] = kind

    assert message_event(payload, ME, thread_ids=THREADS) is None


@pytest.mark.parametrize(
    "change",
    [
        {"author": {"id": "643945264868098049", "username": "Discord", "system": True}},
        {"flags": 1 << 6},
    ],
)
def test_system_user_and_ephemeral_messages_are_ignored(change: dict[str, Any]) -> None:
    payload = d("message_create_in_thread")
    payload.update(change)

    assert message_event(payload, ME, thread_ids=THREADS) is None


@pytest.mark.parametrize("field", ["id", "channel_id", "author", "content", "type"])
def test_a_message_missing_a_field_is_ignored(field: str) -> None:
    payload = d("message_create_in_thread")
    del payload[field]

    assert message_event(payload, ME, thread_ids=THREADS) is None


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"id": 5, "channel_id": THREAD, "author": {"id": ALICE.id}, "content": "x", "type": 0},
        {"id": REPLY, "channel_id": THREAD, "author": "alice", "content": "x", "type": 0},
        {"id": REPLY, "channel_id": THREAD, "author": {"id": ALICE.id}, "content": 3, "type": 0},
        {
            "id": REPLY,
            "channel_id": THREAD,
            "author": {"id": ALICE.id},
            "content": "x",
            "type": "0",
        },
    ],
)
def test_a_malformed_message_is_ignored_without_an_exception(payload: dict[str, Any]) -> None:
    assert message_event(payload, ME, thread_ids=THREADS) is None
    assert content_missing(payload, ME) is False


def test_odd_mentions_and_roles_do_not_break_a_message() -> None:
    payload = d("message_create_in_thread")
    payload.update(mentions=["x", None, {"id": 3}], mention_roles=[None, 7], attachments=None)

    event = message_event(payload, ME, thread_ids=THREADS, bot_roles={"7"})

    assert event is not None and not event.mentions_bot


# --- content withheld (no Message Content intent) ----------------------------------


def withheld() -> dict[str, Any]:
    """The thread answer as an app without the Message Content intent receives it."""
    payload = d("message_create_in_thread")
    payload.update(content="", embeds=[], attachments=[], components=[])
    return payload


def test_an_empty_message_in_the_thread_is_marked_unreadable() -> None:
    event = message_event(withheld(), ME, thread_ids=THREADS)

    assert content_missing(withheld(), ME)
    assert event is not None and event.unreadable and event.text == ""
    assert event.ref.thread == THREAD


@pytest.mark.parametrize(
    "change",
    [
        {"attachments": [{"id": "1", "filename": "trace.txt"}]},
        {"embeds": [{"type": "rich", "title": "x"}]},
        {"sticker_items": [{"id": "1", "name": "wave", "format_type": 1}]},
        {"content": "ok"},
        {"mentions": [{"id": BOT, "username": "agent-bot", "bot": True}]},
    ],
)
def test_a_message_with_something_in_it_is_readable(change: dict[str, Any]) -> None:
    payload = withheld()
    payload.update(change)

    event = message_event(payload, ME, thread_ids=THREADS)

    assert not content_missing(payload, ME)
    assert event is not None and not event.unreadable


def test_direct_messages_and_the_bots_own_are_never_withheld() -> None:
    direct = withheld()
    del direct["guild_id"]
    own = withheld()
    own["author"] = {"id": BOT, "username": "agent-bot", "bot": True}

    assert not content_missing(direct, ME)
    assert not content_missing(own, ME)
    assert content_missing(d("message_create_in_thread"), ME) is False


# --- reactions --------------------------------------------------------------------


def test_an_approval_reaction_on_the_plan() -> None:
    event = reaction_event(d("message_reaction_add_unicode"), ME, added=True)

    assert event == ReactionChanged(
        delivery_key=f"discord:reaction:add:{THREAD}:{PLAN}:{ALICE.id}:white_check_mark",
        ref=ref(channel=THREAD, message=PLAN, user=ALICE.id),
        author=ALICE,
        emoji="white_check_mark",
        added=True,
    )


def test_a_removed_reaction_has_no_member_to_name_its_author() -> None:
    event = reaction_event(d("message_reaction_remove"), ME, added=False)

    assert event == ReactionChanged(
        delivery_key=f"discord:reaction:remove:{THREAD}:{PLAN}:{ALICE.id}:white_check_mark",
        ref=ref(channel=THREAD, message=PLAN, user=ALICE.id),
        author=ALICE,
        emoji="white_check_mark",
        added=False,
    )


def test_a_reaction_in_a_known_thread_names_the_thread() -> None:
    event = reaction_event(d("message_reaction_add_unicode"), ME, added=True, thread_ids=THREADS)

    assert event is not None and event.ref.thread == THREAD


def test_the_bots_own_reaction_is_ignored() -> None:
    payload = d("message_reaction_add_unicode")
    payload["user_id"] = BOT
    payload["member"]["user"] = {"id": BOT, "username": "agent-bot", "bot": True}

    assert reaction_event(payload, ME, added=True) is None
    assert reaction_event(payload, ME, added=False) is None


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("✅", "white_check_mark"),
        ("✅\ufe0f", "white_check_mark"),
        ("✔\ufe0f", "heavy_check_mark"),
        ("✔", "heavy_check_mark"),
        ("❌", "x"),
        ("👍", "+1"),
        ("👍🏽", "+1"),
        ("👎🏿", "-1"),
        ("🛑", "octagonal_sign"),
        ("🚀", "🚀"),
    ],
)
def test_a_unicode_reaction_becomes_its_shortcode_name(raw: str, name: str) -> None:
    payload = d("message_reaction_add_unicode")
    payload["emoji"] = {"id": None, "name": raw}

    event = reaction_event(payload, ME, added=True)

    assert event is not None and event.emoji == name
    assert event.delivery_key.endswith(f":{name}")


def test_a_custom_emoji_is_known_by_its_name_and_keyed_by_its_id() -> None:
    payload = d("message_reaction_add_unicode")
    payload["emoji"] = {"id": CUSTOM_EMOJI, "name": "ShipIt", "animated": False}

    event = reaction_event(payload, ME, added=True)

    assert event is not None and event.emoji == "ShipIt"
    assert event.delivery_key == f"discord:reaction:add:{THREAD}:{PLAN}:{ALICE.id}:{CUSTOM_EMOJI}"


def test_a_reaction_by_a_nicknamed_member_names_them_by_mention() -> None:
    payload = d("message_reaction_add_unicode")
    payload["member"]["nick"] = "Al"

    event = reaction_event(payload, ME, added=True)

    assert event is not None and event.author == ALICE


def test_a_reaction_in_a_direct_message_has_no_workspace() -> None:
    payload = d("message_reaction_remove")
    del payload["guild_id"]

    event = reaction_event(payload, ME, added=True)

    assert event is not None and event.ref.workspace == "" and event.added


@pytest.mark.parametrize(
    "change",
    [
        {"user_id": None},
        {"channel_id": ""},
        {"message_id": 12},
        {"emoji": {"id": CUSTOM_EMOJI, "name": None}},
        {"emoji": None},
        {"emoji": {"id": None, "name": "\ufe0f"}},
    ],
)
def test_a_malformed_reaction_is_ignored(change: dict[str, Any]) -> None:
    payload = d("message_reaction_add_unicode")
    payload.update(change)

    assert reaction_event(payload, ME, added=True) is None


# --- interactions -----------------------------------------------------------------


def test_stop_typed_in_the_thread_names_the_thread() -> None:
    event = interaction_event(d("interaction_create_slash_in_thread"), ME)

    assert event == CommandInvoked(
        delivery_key="discord:interaction:1250000298311811072",
        ref=ref(channel=THREAD, thread=THREAD, user=ALICE.id, parent=PROJ),
        author=ALICE,
        name="stop",
        args="",
    )


def test_stop_typed_in_a_channel_has_no_thread() -> None:
    payload = d("interaction_create_slash_in_thread")
    payload["channel_id"] = PROJ
    payload["channel"] = {"id": PROJ, "type": 0, "name": "proj", "guild_id": GUILD}

    event = interaction_event(payload, ME)

    assert isinstance(event, CommandInvoked)
    assert event.ref == ref(channel=PROJ, thread=None, user=ALICE.id)


def test_a_command_without_the_channel_object_uses_channel_id() -> None:
    payload = d("interaction_create_slash_in_thread")
    del payload["channel"]

    event = interaction_event(payload, ME)

    assert isinstance(event, CommandInvoked)
    assert event.ref.channel == THREAD and event.ref.thread is None


def test_command_options_and_subcommands_become_the_arguments() -> None:
    payload = d("interaction_create_slash_in_thread")
    payload["data"].update(name="threadbot")
    payload["data"]["options"] = [
        {
            "name": "stop",
            "type": 1,
            "options": [
                {"name": "thread", "type": 3, "value": THREAD},
                {"name": "force", "type": 5, "value": True},
                {"name": "after", "type": 4, "value": 30},
            ],
        }
    ]

    event = interaction_event(payload, ME)

    assert isinstance(event, CommandInvoked)
    assert (event.name, event.args) == ("threadbot", f"stop {THREAD} true 30")


def settings_interaction(**subcommand: Any) -> dict[str, Any]:
    """``/threadbot settings`` typed in the thread: the /stop fixture with the subcommand.

    Discord sends a subcommand as an option of type SUB_COMMAND (1) under the
    command's ``data``
    (https://discord.com/developers/docs/interactions/application-commands#subcommands-and-subcommand-groups).
    """
    payload = d("interaction_create_slash_in_thread")
    payload["data"].update(name="threadbot")
    payload["data"]["options"] = [{"name": "settings", "type": 1, **subcommand}]
    return payload


@pytest.mark.parametrize("subcommand", [{}, {"options": []}])
def test_threadbot_settings_is_the_settings_command(subcommand: dict[str, Any]) -> None:
    event = interaction_event(settings_interaction(**subcommand), ME)

    assert event == CommandInvoked(
        delivery_key="discord:interaction:1250000298311811072",
        ref=ref(channel=THREAD, thread=THREAD, user=ALICE.id, parent=PROJ),
        author=ALICE,
        name="threadbot",
        args="settings",
    )


def test_a_message_command_gives_its_target() -> None:
    payload = d("interaction_create_slash_in_thread")
    payload["data"].update(name="Stop this conversation", type=3, target_id=PLAN)

    event = interaction_event(payload, ME)

    assert isinstance(event, CommandInvoked) and event.args == PLAN


def test_a_command_in_a_direct_message_comes_from_user() -> None:
    payload = d("interaction_create_slash_in_thread")
    person = payload.pop("member")["user"]
    for field in ("guild_id", "guild", "guild_locale"):
        del payload[field]
    payload.update(user=person, channel_id="1250000000000000001", context=1)
    payload["channel"] = {"id": "1250000000000000001", "type": 1}

    event = interaction_event(payload, ME)

    assert isinstance(event, CommandInvoked)
    assert event.author == ALICE
    assert event.ref == PlatformRef(
        platform="discord", workspace="", channel="1250000000000000001", user=ALICE.id
    )


def test_the_approve_button_on_the_plan() -> None:
    event = interaction_event(d("interaction_create_button"), ME)

    assert event == ButtonPressed(
        delivery_key="discord:interaction:1250000301234567168",
        ref=ref(channel=THREAD, thread=THREAD, message=PLAN, user=ALICE.id, parent=PROJ),
        author=ALICE,
        action="threadbot:approve:plan:1",
    )


def test_a_button_the_bot_rendered_comes_back_with_its_action() -> None:
    button = Button(label="Approve", action="approve:req-42", style="primary")
    rendered = components([button])[0]["components"][0]
    payload = d("interaction_create_button")
    payload["data"]["custom_id"] = rendered["custom_id"]
    payload["message"]["components"] = components([button])

    event = interaction_event(payload, ME)

    assert isinstance(event, ButtonPressed) and event.action == button.value
    assert event.action == 'tb1:{"k":"approve","r":"req-42"}'


def test_a_button_outside_a_thread_has_no_thread() -> None:
    payload = d("interaction_create_button")
    payload["channel_id"] = PROJ
    payload["channel"] = {"id": PROJ, "type": 0}

    event = interaction_event(payload, ME)

    assert isinstance(event, ButtonPressed)
    assert event.ref == ref(channel=PROJ, thread=None, message=PLAN, user=ALICE.id)


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("interaction_create_button", {"type": 1}),
        ("interaction_create_button", {"type": 4}),
        ("interaction_create_button", {"type": 5}),
        ("interaction_create_button", {"data": {"custom_id": "pick", "component_type": 3}}),
        ("interaction_create_button", {"data": {"component_type": 2}}),
        ("interaction_create_button", {"message": None}),
        ("interaction_create_button", {"member": None}),
        ("interaction_create_button", {"id": None}),
        ("interaction_create_slash_in_thread", {"data": {"id": "1", "type": 1}}),
        ("interaction_create_slash_in_thread", {"channel_id": None, "channel": None}),
        ("interaction_create_slash_in_thread", {"type": "2"}),
    ],
)
def test_other_or_malformed_interactions_are_ignored(name: str, change: dict[str, Any]) -> None:
    payload = d(name)
    payload.update(change)

    assert interaction_event(payload, ME) is None


# --- threads ----------------------------------------------------------------------


def test_a_thread_s_events_name_the_channel_it_is_in_when_known() -> None:
    """A thread is a channel of its own: its events carry the channel it was started in
    (from THREAD_CREATE's ``parent_id``), so that channel's settings apply in it."""
    parents = {THREAD: str(thread_parent_of(d("thread_create")))}
    assert parents == {THREAD: PROJ}
    answer = message_event(d("message_create_in_thread"), ME, thread_ids=THREADS, parents=parents)
    reaction = reaction_event(
        d("message_reaction_add_unicode"), ME, added=True, thread_ids=THREADS, parents=parents
    )
    mention = message_event(
        d("message_create_mention_bot"), ME, thread_ids=THREADS, parents=parents
    )
    assert answer is not None and (answer.ref.parent, answer.ref.home) == (PROJ, PROJ)
    assert reaction is not None and reaction.ref.parent == PROJ
    assert mention is not None and (mention.ref.parent, mention.ref.home) == (None, PROJ)
    unknown = message_event(d("message_create_in_thread"), ME, thread_ids=THREADS)
    assert unknown is not None and (unknown.ref.parent, unknown.ref.home) == (None, THREAD)


def test_thread_create_gives_the_thread_id() -> None:
    payload = d("thread_create")

    assert thread_id_of(payload) == THREAD
    assert thread_id_of({**payload, "type": 0}) is None
    assert thread_id_of({"type": 11}) is None


def test_the_conversation_opened_on_a_mention_is_found_by_every_later_event() -> None:
    mention = message_event(d("message_create_mention_bot"), ME, thread_ids=THREADS)
    assert mention is not None
    thread = thread_id_of(d("thread_create"))
    assert thread is not None and thread == mention.ref.message

    opened = opened_in_thread(mention, thread)
    # The hub binds a new conversation to the mention's ref in the thread of its message.
    binding = opened.ref.in_thread(opened.ref.thread or str(opened.ref.message))
    answer = message_event(d("message_create_in_thread"), ME, thread_ids={thread})
    reaction = reaction_event(d("message_reaction_add_unicode"), ME, added=True)
    stop = interaction_event(d("interaction_create_slash_in_thread"), ME)
    button = interaction_event(d("interaction_create_button"), ME)

    assert opened.ref.thread is None and opened.ref.message == ROOT
    assert (binding.channel, binding.thread) == (THREAD, THREAD)
    for later in (answer, stop, button):
        assert later is not None
        assert (later.ref.channel, later.ref.thread) == (binding.channel, binding.thread)
    assert reaction is not None and reaction.ref.channel == binding.channel
    assert answer is not None and opened_in_thread(answer, "9") == answer
    assert opened.ref.parent == PROJ  # the channel whose settings apply in the thread
    direct = opened.model_copy(update={"ref": opened.ref.model_copy(update={"workspace": ""})})
    assert opened_in_thread(direct, "9") == direct


# --- outbound: replies ------------------------------------------------------------

IN_THREAD = ref(channel=THREAD, thread=THREAD)


def test_a_reply_in_the_thread_posts_to_the_thread() -> None:
    calls = render(PostReply(ref=IN_THREAD, text="📋 Plan (v1)"), nonce="tb-7")

    assert calls == [
        RestCall(
            "POST",
            f"/channels/{THREAD}/messages",
            {
                "content": "📋 Plan (v1)",
                "nonce": "tb-7",
                "enforce_nonce": True,
                "allowed_mentions": {"parse": []},
                "flags": 4,
            },
        )
    ]


def test_a_reply_to_a_channel_posts_to_the_channel() -> None:
    [call] = render(PostReply(ref=ref(channel=PROJ), text="No conversation here."), nonce="k")

    assert call.path == f"/channels/{PROJ}/messages"


def test_a_reply_in_a_direct_message_answers_the_message_that_opened_it() -> None:
    dm = PlatformRef(platform="discord", channel="1250000000000000001", thread=REPLY)

    first, second = render(PostReply(ref=dm, text="a " * 1500), nonce="tb-8")

    assert first.path == second.path == "/channels/1250000000000000001/messages"
    assert first.json is not None and second.json is not None
    assert first.json["message_reference"] == {"message_id": REPLY, "fail_if_not_exists": False}
    assert "message_reference" not in second.json


def test_an_ephemeral_reply_is_posted_to_the_thread() -> None:
    """Outside a command's own response (the sender's :func:`command_answer`)."""
    [call] = render(PostReply(ref=IN_THREAD, text="only you", ephemeral_to=ALICE.id), nonce="k")

    assert call.path == f"/channels/{THREAD}/messages"


def test_a_long_answer_to_a_command_fills_its_deferral_then_follows_up_ephemerally() -> None:
    stop = Button(label="Stop", action=STOP_C1, style="danger")
    action = PostReply(ref=IN_THREAD, text="a " * 1500, ephemeral_to=ALICE.id, buttons=(stop,))
    webhook = f"/webhooks/{BOT}/the-token"

    first, second = command_answer(action, application=BOT, token="the-token", original=True)
    [later] = command_answer(
        action.model_copy(update={"text": "b"}), application=BOT, token="the-token", original=False
    )

    assert (first.method, first.path) == ("PATCH", f"{webhook}/messages/@original")
    assert (second.method, second.path) == (later.method, later.path) == ("POST", webhook)
    assert first.json is not None and second.json is not None and later.json is not None
    assert "components" not in first.json and "flags" not in first.json
    assert second.json["components"] == components((stop,))
    assert second.json["flags"] == later.json["flags"] == 64 | 4  # EPHEMERAL, SUPPRESS_EMBEDS
    assert all(c.json["allowed_mentions"] == {"parse": []} for c in (first, second, later))
    assert first.json["content"].split() + second.json["content"].split() == ["a"] * 1500


APPROVE_REQ_1 = 'tb1:{"k":"approve","r":"req-1"}'
REJECT_REQ_1 = 'tb1:{"k":"reject","r":"req-1"}'
STOP_C1 = 'tb1:{"k":"stop","c":"c1"}'
"""Button values (:func:`conversations.actions.encode`) as Discord carries them."""


def test_a_reply_carries_its_buttons_in_action_rows() -> None:
    buttons = (
        Button(label="Approve", action="approve:req-1", style="primary"),
        Button(label="Reject", action="reject:req-1", style="danger"),
        Button(label="Later", action="stop:c1"),
    )

    [call] = render(PostReply(ref=IN_THREAD, text="Plan", buttons=buttons), nonce="k")

    assert call.json is not None
    assert call.json["components"] == [
        {
            "type": 1,
            "components": [
                {"type": 2, "style": 1, "label": "Approve", "custom_id": APPROVE_REQ_1},
                {"type": 2, "style": 4, "label": "Reject", "custom_id": REJECT_REQ_1},
                {"type": 2, "style": 2, "label": "Later", "custom_id": STOP_C1},
            ],
        }
    ]


def long_answer() -> str:
    """About 5,000 characters of prose and a code block that no chunk can hold whole."""
    prose = " ".join(f"Step {n} checks the session fixture again." for n in range(26))
    code = "\n".join(f"    assert login(user_{n}) is not None  # run {n}" for n in range(60))
    text = f"{prose}\n\n```python\ndef test_login():\n{code}\n```\n\n{prose}"
    assert 4900 <= len(text) <= 5300
    return text


def test_a_long_answer_is_split_with_its_code_fences_intact_and_buttons_last() -> None:
    text = long_answer()
    buttons = tuple(Button(label=f"Allow {n}", action=f"allow:r:{n}") for n in range(3))

    calls = render(PostReply(ref=IN_THREAD, text=text, buttons=buttons), nonce="tb-99")

    bodies = [call.json for call in calls]
    assert len(calls) >= 3 and all(body is not None for body in bodies)
    contents = [str(body["content"]) for body in bodies if body]
    assert all(len(content) <= MAX_TEXT for content in contents)
    assert all(content.count("```") % 2 == 0 for content in contents)
    assert any(content.startswith("```python\n") for content in contents[1:])
    assert "".join(re.sub(r"\s|```(python)?", "", c) for c in contents) == re.sub(
        r"\s|```(python)?", "", text
    )
    assert [("components" in body) for body in bodies if body] == [False] * (len(calls) - 1) + [
        True
    ]
    nonces = [body["nonce"] for body in bodies if body]
    assert nonces[0] == "tb-99" and len(set(nonces)) == len(nonces)
    assert all(len(nonce) <= 25 for nonce in nonces)
    assert {call.path for call in calls} == {f"/channels/{THREAD}/messages"}


def test_nonces_are_stable_short_and_distinct_per_part() -> None:
    key = "tb-now-" + "9f" * 16

    assert message_nonce("tb-1") == "tb-1"
    assert message_nonce(key) == message_nonce(key) != message_nonce(key, 1)
    assert len(message_nonce(key)) == 25 and len(message_nonce("tb-1", 1)) == 25
    assert message_nonce("") != ""
    assert message_nonce("x" * 25) == "x" * 25 and message_nonce("x" * 26) != "x" * 25


def test_the_same_reply_renders_the_same_calls() -> None:
    action = PostReply(ref=IN_THREAD, text=long_answer())

    assert render(action, nonce="tb-5") == render(action, nonce="tb-5")
    assert render(action, nonce="tb-5") != render(action, nonce="tb-6")


def test_an_empty_reply_posts_nothing_unless_it_has_buttons() -> None:
    button = Button(label="Stop", action="stop:c1", style="danger")

    assert render(PostReply(ref=IN_THREAD, text=""), nonce="k") == []
    [call] = render(PostReply(ref=IN_THREAD, text="", buttons=(button,)), nonce="k")
    assert call.json is not None and call.json["content"] == ""
    assert call.json["components"][0]["components"][0]["custom_id"] == STOP_C1


def test_buttons_fill_rows_of_five_and_at_most_five_rows() -> None:
    twelve = [Button(label=str(n), action=f"stop:c{n}") for n in range(12)]
    thirty = [Button(label=str(n), action=f"stop:c{n}") for n in range(30)]

    assert [len(row["components"]) for row in components(twelve)] == [5, 5, 2]
    rows = components(thirty)
    assert [len(row["components"]) for row in rows] == [5] * 5
    assert rows[-1]["components"][-1]["custom_id"] == 'tb1:{"k":"stop","c":"c24"}'
    assert components([]) == []


def test_buttons_with_a_repeated_action_are_dropped_and_long_labels_cut() -> None:
    buttons = [
        Button(label="x" * 120, action="approve:r"),
        Button(label="Again", action="approve:r"),
        Button(label=" ", action="reject:r"),
    ]

    [row] = components(buttons)

    labels = [b["label"] for b in row["components"]]
    reject = 'tb1:{"k":"reject","r":"r"}'
    assert [b["custom_id"] for b in row["components"]] == ['tb1:{"k":"approve","r":"r"}', reject]
    assert len(labels[0]) == 80 and labels[0].endswith("…")
    assert labels[1] == reject


def test_an_action_too_long_for_a_custom_id_is_refused() -> None:
    too_long = ApproveButton.model_construct(request="a" * 101)  # past the model's own limit
    with pytest.raises(ValueError, match="at most 100 characters"):
        components([Button(label="Go", action=too_long)])


def test_a_text_limit_below_twenty_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 20"):
        render(PostReply(ref=IN_THREAD, text="hello"), nonce="k", max_text=10)


# --- outbound: edits and reactions ------------------------------------------------


def test_an_update_edits_the_message_and_replaces_its_buttons() -> None:
    action = UpdateMessage(ref=IN_THREAD.model_copy(update={"message": PLAN}), text="Approved ✅")

    assert render(action, nonce="k") == [
        RestCall(
            "PATCH",
            f"/channels/{THREAD}/messages/{PLAN}",
            {"content": "Approved ✅", "components": [], "allowed_mentions": {"parse": []}},
        )
    ]


def test_a_long_update_is_cut_with_an_ellipsis() -> None:
    action = UpdateMessage(ref=IN_THREAD.model_copy(update={"message": PLAN}), text=long_answer())

    [call] = render(action, nonce="k")

    assert call.json is not None
    content = str(call.json["content"])
    assert len(content) <= MAX_TEXT and content.endswith("\n…")


@pytest.mark.parametrize(
    ("name", "encoded"),
    [
        ("white_check_mark", "%E2%9C%85"),
        ("✅", "%E2%9C%85"),
        ("x", "%E2%9D%8C"),
        ("thumbsup", "%F0%9F%91%8D"),
        ("👍🏽", "%F0%9F%91%8D"),
        ("heavy_check_mark", "%E2%9C%94%EF%B8%8F"),
        ("🚀", "%F0%9F%9A%80"),
    ],
)
def test_a_reaction_puts_the_url_encoded_character(name: str, encoded: str) -> None:
    action = AddReaction(ref=IN_THREAD.model_copy(update={"message": PLAN}), emoji=name)

    assert render(action, nonce="k") == [
        RestCall("PUT", f"/channels/{THREAD}/messages/{PLAN}/reactions/{encoded}/@me", None)
    ]


def test_a_reaction_name_without_a_character_is_refused() -> None:
    action = AddReaction(ref=IN_THREAD.model_copy(update={"message": PLAN}), emoji="shipit")

    with pytest.raises(ValueError, match="shipit"):
        render(action, nonce="k")


@pytest.mark.parametrize(
    "action",
    [
        UpdateMessage(ref=ref(channel=THREAD, thread=THREAD), text="x"),
        AddReaction(ref=ref(channel=THREAD, thread=THREAD), emoji="x"),
    ],
)
def test_an_edit_or_reaction_without_a_message_is_refused(
    action: UpdateMessage | AddReaction,
) -> None:
    with pytest.raises(ValueError, match=r"ref\.message"):
        render(action, nonce="k")


def test_seeded_reactions_go_on_the_posted_message_once_each() -> None:
    action = PostReply(
        ref=IN_THREAD, text="Plan", reactions=("✅", "white_check_mark", "x", "shipit")
    )

    calls = seed_reactions(action, THREAD, PLAN)

    assert [call.path for call in calls] == [
        f"/channels/{THREAD}/messages/{PLAN}/reactions/%E2%9C%85/@me",
        f"/channels/{THREAD}/messages/{PLAN}/reactions/%E2%9D%8C/@me",
    ]
    assert {call.method for call in calls} == {"PUT"}


# --- outbound: thread names -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("please fix the flaky login test", "please fix the flaky login test"),
        (f"<@{BOT}> fix\n\nthe   login <#{PROJ}> test", "fix the login test"),
        ("ship it <:ShipIt:1202553933004931080> <a:party:1>", "ship it :ShipIt: :party:"),
        ("", "threadbot"),
        (f"   <@!{BOT}>  \n", "threadbot"),
    ],
)
def test_a_thread_name_is_one_clean_line(text: str, name: str) -> None:
    assert thread_name(text) == name


def test_a_long_request_is_cut_to_a_thread_name_at_a_word() -> None:
    text = "find out why the login test fails on CI but not locally " * 6

    name = thread_name(text)

    assert len(name) <= 100 and name.endswith("…")
    assert text.startswith(name[:-1]) and not name[:-1].endswith(" ")
    assert len(thread_name("x" * 300)) == 100
