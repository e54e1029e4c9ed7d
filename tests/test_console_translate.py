"""The console's line grammar, on its own: every form, and every way to get it wrong."""

from __future__ import annotations

import pytest

from adapters.console import translate
from adapters.console.translate import (
    Blank,
    Context,
    Invalid,
    Quit,
    ShowHelp,
    SwitchUser,
    author_for,
    echo,
    parse_line,
    render_message,
    render_reaction,
)
from conversations.events import (
    Author,
    Button,
    CommandInvoked,
    MessagePosted,
    PlatformRef,
    ReactionChanged,
)

YOU = Author(id="console:you", name="you")
# [1] root, [2] bot reply in 1, [3] another root, [4] reply in 1
ROOTS = {1: 1, 2: 1, 3: 3, 4: 1}


def ctx(*, next_id: int = 5, next_counter: int = 7, author: Author = YOU) -> Context:
    return Context(author=author, next_id=next_id, next_counter=next_counter, roots=ROOTS)


def ref(thread: str | None, message: str | None) -> PlatformRef:
    return PlatformRef(
        platform="console", channel="console", thread=thread, message=message, user=YOU.id
    )


def test_plain_text_is_a_new_mention_that_names_its_thread() -> None:
    parsed = parse_line("the login test is flaky, fix it\n", ctx())
    assert parsed == MessagePosted(
        delivery_key="console:5",
        ref=ref(None, "5"),
        author=YOU,
        text="the login test is flaky, fix it",
        mentions_bot=True,
    )
    assert parsed.ref.workspace == ""


def test_first_message_gets_id_1() -> None:
    empty = Context(author=YOU, next_id=1, next_counter=1, roots={})
    parsed = parse_line("hello", empty)
    assert isinstance(parsed, MessagePosted)
    assert (parsed.delivery_key, parsed.ref.message) == ("console:1", "1")


@pytest.mark.parametrize(("target", "root"), [("1", "1"), ("2", "1"), ("4", "1"), ("3", "3")])
def test_reply_goes_to_the_thread_of_any_message_in_it(target: str, root: str) -> None:
    parsed = parse_line(f">{target} use one per test", ctx())
    assert parsed == MessagePosted(
        delivery_key="console:5",
        ref=ref(root, "5"),
        author=YOU,
        text="use one per test",
        mentions_bot=False,
    )


def test_reply_allows_a_space_after_the_arrow() -> None:
    parsed = parse_line("> 2   1", ctx())
    assert isinstance(parsed, MessagePosted)
    assert (parsed.ref.thread, parsed.text) == ("1", "1")


@pytest.mark.parametrize("emoji", ["✅", "white_check_mark", ":white_check_mark:", "✅️"])
def test_reaction_added_in_any_spelling(emoji: str) -> None:
    parsed = parse_line(f"+{emoji} 2", ctx())
    assert parsed == ReactionChanged(
        delivery_key="console:r7",
        ref=ref("1", "2"),
        author=YOU,
        emoji="white_check_mark",
        added=True,
    )


def test_reaction_on_a_root_names_the_root_as_thread() -> None:
    parsed = parse_line("+:x: 3", ctx())
    assert isinstance(parsed, ReactionChanged)
    assert (parsed.ref.thread, parsed.ref.message, parsed.emoji) == ("3", "3", "x")


def test_reaction_removed() -> None:
    parsed = parse_line("-❌ 2", ctx())
    assert isinstance(parsed, ReactionChanged)
    assert (parsed.added, parsed.emoji, parsed.ref.thread) == (False, "x", "1")


def test_thumbs_up_by_alias() -> None:
    parsed = parse_line("+thumbsup 1", ctx())
    assert isinstance(parsed, ReactionChanged)
    assert parsed.emoji == "+1"


def test_deciding_one_call_of_an_approval_request() -> None:
    parsed = parse_line("+✅ 2.2", ctx())
    assert parsed == CommandInvoked(
        delivery_key="console:r7",
        ref=ref("1", "2"),
        author=YOU,
        name="decide",
        args="2.2 white_check_mark",
        means="reaction",  # the person reacted: the audit trail says so
    )
    denied = parse_line("+:x: 4.1", ctx())
    assert isinstance(denied, CommandInvoked)
    assert denied.args == "4.1 x"


def test_stop_everything_and_stop_one_thread() -> None:
    assert parse_line("/stop", ctx()) == CommandInvoked(
        delivery_key="console:r7", ref=ref(None, None), author=YOU, name="stop", args=""
    )
    assert parse_line("/stop 4", ctx()) == CommandInvoked(
        delivery_key="console:r7", ref=ref("1", None), author=YOU, name="stop", args="1"
    )


def test_settings_asks_the_hub_for_this_channels_settings() -> None:
    assert parse_line("/settings", ctx()) == CommandInvoked(
        delivery_key="console:r7", ref=ref(None, None), author=YOU, name="settings", args=""
    )
    assert parse_line("  /settings  ", ctx(next_counter=9)) == CommandInvoked(
        delivery_key="console:r9", ref=ref(None, None), author=YOU, name="settings"
    )


def test_settings_is_in_the_help_whatever_the_stop_command_is_called() -> None:
    for lines in (translate.HELP, translate.help_lines("halt")):
        [line] = [line for line in lines if line.startswith("/settings")]
        assert "settings" in line.removeprefix("/settings")


def test_local_commands() -> None:
    assert parse_line("/as alice", ctx()) == SwitchUser("alice")
    assert parse_line("/help", ctx()) == ShowHelp()
    assert parse_line("/quit", ctx()) == Quit()
    assert parse_line("   \n", ctx()) == Blank()
    assert author_for("alice") == Author(id="console:alice", name="alice")


def test_the_author_comes_from_the_context() -> None:
    alice = author_for("alice")
    parsed = parse_line("+✅ 1", ctx(author=alice))
    assert isinstance(parsed, ReactionChanged)
    assert (parsed.author, parsed.ref.user) == (alice, "console:alice")


def test_backslash_sends_the_rest_as_text() -> None:
    parsed = parse_line("\\/stop is a command", ctx())
    assert isinstance(parsed, MessagePosted)
    assert (parsed.text, parsed.mentions_bot) == ("/stop is a command", True)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (">9 hello", "no message [9]"),
        ("+✅ 9", "no message [9]"),
        ("-✅ 9", "no message [9]"),
        ("+✅ 9.1", "no message [9]"),
        ("/stop 9", "no message [9]"),
        (">2", "nothing to say"),
        (">x hello", "a reply is >N text"),
        ("+✅3", "a reaction is +EMOJI N"),
        ("+✅", "a reaction is +EMOJI N"),
        ("+ 3", "a reaction is +EMOJI N"),
        ("- a list item", "a reaction is +EMOJI N"),
        ("+✅ 2.0", "numbered from 1"),
        ("-✅ 2.1", "cannot be taken back"),
        ("/stop now", "/stop takes a message id"),
        ("/as", "/as takes one name"),
        ("/as two words", "/as takes one name"),
        ("/help me", "takes no argument"),
        ("/settings all", "/settings takes no argument"),
        ("/deploy prod", "unknown command /deploy"),
        ("/", "unknown command /"),
        ("\\", "nothing to send"),
    ],
)
def test_errors_say_what_is_wrong_and_send_nothing(line: str, says: str) -> None:
    parsed = parse_line(line, ctx())
    assert isinstance(parsed, Invalid)
    assert says in parsed.message
    assert "\n" not in parsed.message


def test_help_lists_every_command() -> None:
    text = "\n".join(translate.HELP)
    forms = (">N", "+EMOJI N", "-EMOJI N", "N.K", "/stop", "/settings", "/as", "/help", "/quit")
    for form in forms:
        assert form in text


def test_render_a_bot_message_in_a_thread() -> None:
    lines = render_message(
        2,
        "1",
        "threadbot",
        "📋 Plan (v1)\n  1. Run the tests\n\n  2. Fix the fixture",
        buttons=(
            Button(label="Approve", action="approve:a"),
            Button(label="Reject", action="reject:a"),
        ),
        reactions=("white_check_mark", "x"),
    )
    assert lines == [
        "  [2] ↳1 threadbot: 📋 Plan (v1)",
        "        1. Run the tests",
        "",
        "        2. Fix the fixture",
        "      [Approve] [Reject] (reactions: ✅ ❌)",
    ]


def test_render_top_level_and_edited() -> None:
    assert render_message(1, None, "you", "hi") == ["[1] you: hi"]
    assert render_message(7, None, "bot", "a\nb", edited=True) == [
        "[7] bot (edited): a",
        "    b",
    ]
    assert render_message(3, "1", "bot", "", reactions=("repeat",)) == [
        "  [3] ↳1 bot:",
        "      (reactions: 🔁)",
    ]
    assert render_reaction("2", True, True, "x", "threadbot") == "  [2] +❌ threadbot"
    assert render_reaction("1", False, False, "tada", "you") == "[1] -:tada: you"


def test_echo_of_what_a_person_sent() -> None:
    roots = {**ROOTS, 5: 1}
    reply = parse_line(">2 one per test", ctx())
    assert isinstance(reply, MessagePosted)
    assert echo(reply, roots) == ["  [5] ↳1 you: one per test"]
    mention = parse_line("hi", ctx())
    assert isinstance(mention, MessagePosted)
    assert echo(mention, {**ROOTS, 5: 5}) == ["[5] you: hi"]
    for line, shown in [
        ("+✅ 2", "  [2] +✅ you"),
        ("-x 3", "[3] -❌ you"),
        ("+✅ 2.2", "  [2.2] +✅ you"),
        ("/stop 2", "  ↳1 you: /stop 1"),
        ("/stop", "you: /stop"),
    ]:
        event = parse_line(line, ctx())
        assert isinstance(event, ReactionChanged | CommandInvoked)
        assert echo(event, roots) == [shown]
