"""Questions with choices (issue 31): one click, one reaction or one number answers.

The real bolt app / slack-sdk and discord.py against the local fakes, and the console
through its streams. The model asks "Which database?" with options; Alice (the
requester) or Bob (an approver) picks one by button, by number reaction, by the
console's ``+2️⃣ N`` or ``>N 2``, or answers in words; the model reads who chose what,
and the question's message is edited to say so, its buttons gone. Someone else's
choice is refused as any decision is; more than 9 options are refused to the model;
on Discord the "Answer in words" button opens a form (a modal) as the interaction's
first answer, and its submit answers the question.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from adapters.console.translate import HELP
from adapters.discord.modals import ANSWER_LABEL, answer_modal, submitted_text
from conversations.actions import MAX_CHARS, AnswerButton, ChooseButton, decode, encode
from conversations.emoji import normalize
from conversations.emoji import number as emoji_number
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.tools.control import AskUser, parse
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import RequestState
from tests.platform_threads import PEOPLE, ConsoleThread, DiscordThread, SlackThread, on
from tests.slack_harness import CHANNEL
from tests.test_discord_story import (
    _restore_discord_py,  # noqa: F401  (restores discord.py)
    buttons,
)
from tests.test_slack_story import finish, plan_buttons
from tests.test_story_console import run_console

OPTIONS = ["staging", "shared, with a lock", "x" * 90]
"""Three options, the last past a button's 75 characters."""
LONG_BUTTON = "3) " + "x" * 71 + "…"
MALLORY = {"slack": "U0MALLORY1", "discord": "222222222222222222", "console": "mallory"}


def asks(options: list[str] | None = None) -> ScriptedTurn:
    ask = {"question": "Which database?", "options": OPTIONS if options is None else options}
    return ScriptedTurn(calls=[ScriptedCall("ask_user", ask)])


def story() -> ScriptedModel:
    return ScriptedModel([asks(), finish("Done.")])


def answer_read(model: ScriptedModel) -> str:
    """The tool result of the ``ask_user`` call, as the model read it next."""
    last = model.requests[-1].messages[-1]["content"]
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert len(results) == 1, last
    content = results[0]["content"]
    return content if isinstance(content, str) else json.dumps(content)


async def press(thread: Any, message: str, label: str, by: str) -> None:
    """``by`` (a person's platform id) presses the button ``label`` under ``message``."""
    if isinstance(thread, SlackThread):
        held = thread.ws.api.message(CHANNEL, message)
        assert held is not None
        await thread.ws.press(held, plan_buttons(held)[label], by=by)
        return
    assert isinstance(thread, DiscordThread)
    held = thread.g.fake.messages[message]
    press = thread.g.interaction_d("interaction_create_button", thread.thread)
    press["member"]["user"].update(id=by, username=f"u{by}", global_name=None)
    press["message"] = copy.deepcopy(held)
    press["data"] = {"custom_id": buttons(held)[label], "component_type": 2}
    await thread.g.dispatch("INTERACTION_CREATE", press)


async def react(thread: Any, message: str, number: int, by: str) -> None:
    """``by`` (a platform id, or a console name) reacts with the number ``number``."""
    keycap = f"{number}\ufe0f\u20e3"
    if isinstance(thread, SlackThread):
        names = ("one", "two", "three")
        await thread.ws.react(message, names[number - 1], by=by)
    elif isinstance(thread, DiscordThread):
        await thread.g.react(thread.thread, message, keycap, by=by)
    else:
        assert isinstance(thread, ConsoleThread)
        await thread.chat.react(message, normalize(keycap), by=by)  # as the console reads it
    await thread.settle()


def who(platform: str, name: str) -> str:
    return name if platform == "console" else PEOPLE[platform][name]


# --- the question's message ---------------------------------------------------------------


@pytest.mark.parametrize("platform", ["slack", "discord", "console"])
async def test_the_options_are_numbered_whole_and_buttons_cut_to_75(settings, platform) -> None:
    async with on(platform, settings, story()) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        shown = thread.shown(thread.message("❓ Which database?"))
        assert shown.text.startswith("❓ Which database? — press a button, react 1️⃣-3️⃣")
        lines = shown.text.splitlines()
        assert lines[1:4] == [
            "1) staging",
            "2) shared, with a lock",
            "3) " + "x" * 90,  # whole in the text
        ]
        assert lines[4:] == [f"{thread.name('alice')}, this question waits for your answer."]
        expected = ["1) staging", "2) shared, with a lock", LONG_BUTTON]
        if platform == "discord":
            expected.append(ANSWER_LABEL)  # the form for an answer in words
        assert shown.buttons == expected
        assert len(LONG_BUTTON) == 75
        assert str((await thread.snapshot()).status) == "waiting(question)"


# --- a choice, four ways -------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["slack", "discord"])
async def test_a_choice_by_button_answers_and_the_message_shows_who(settings, platform) -> None:
    model = story()
    async with on(platform, settings, model) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        asked = thread.message("❓ Which database?")
        await press(thread, asked, "2) shared, with a lock", by=who(platform, "alice"))
        await thread.settle()

        name = thread.name("alice")
        assert answer_read(model) == f"{name} chose option 2: shared, with a lock"
        shown = thread.shown(asked)
        assert shown.text.startswith(
            f"✅ {name} chose 2) shared, with a lock\n❓ Which database?\n"
        )
        assert "press a button" not in shown.text
        assert shown.buttons == []
        snap = await thread.snapshot()
        assert snap.status.lifecycle is Lifecycle.DONE
        assert snap.requests[0].state is RequestState.DECIDED


@pytest.mark.parametrize("platform", ["slack", "discord", "console"])
async def test_a_number_reaction_by_an_approver_picks_that_option(settings, platform) -> None:
    model = story()
    async with on(platform, settings, model) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        asked = thread.message("❓ Which database?")
        await react(thread, asked, 1, by=who(platform, "bob"))

        name = thread.name("bob")
        assert answer_read(model) == f"{name} chose option 1: staging"
        shown = thread.shown(asked)
        assert shown.text.startswith(f"✅ {name} chose 1) staging\n❓ Which database?")
        assert shown.buttons == []
        assert (await thread.snapshot()).status.lifecycle is Lifecycle.DONE


async def test_the_console_picks_by_number_reaction_or_by_replying_the_number(
    make_app,
) -> None:
    model = ScriptedModel([asks(), asks(["red", "blue"]), finish("Done.")])
    app = await make_app(model)
    transcript = await run_console(app, "set up the test database\n+2️⃣ 2\n>3 2\n")

    assert "  [2] +2️⃣ alice" in transcript
    chose = json.dumps(model.requests[1].messages[-1]["content"], ensure_ascii=False)
    assert "alice chose option 2: shared, with a lock" in chose
    assert answer_read(model) == "alice chose option 2: blue"  # ">3 2"
    assert "[2] ↳1 threadbot (edited): ✅ alice chose 2) shared, with a lock" in transcript
    assert "[3] ↳1 threadbot (edited): ✅ alice chose 2) blue" in transcript
    assert any(line.startswith("+1️⃣ N / >N 1") for line in HELP)


@pytest.mark.parametrize("platform", ["slack", "discord", "console"])
async def test_a_reply_in_words_still_answers_and_is_shown(settings, platform) -> None:
    model = story()
    async with on(platform, settings, model) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        asked = thread.message("❓ Which database?")
        await thread.reply("neither: use sqlite in memory", by="alice")
        await thread.settle()

        name = thread.name("alice")
        assert answer_read(model) == f"{name} answered: neither: use sqlite in memory"
        shown = thread.shown(asked)
        assert shown.text.startswith(f"💬 {name} answered: neither: use sqlite in memory\n❓")
        assert shown.buttons == []


# --- who may choose -----------------------------------------------------------------------


async def test_a_bystanders_number_reply_is_an_answer_in_words(settings) -> None:
    model = story()
    async with on("console", settings, model) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        asked = thread.message("❓ Which database?")
        await thread.reply("2", by="mallory")
        await thread.settle()

        assert answer_read(model) == "mallory answered: 2"  # anyone may answer in words
        assert thread.shown(asked).text.startswith("💬 mallory answered: 2\n❓")


@pytest.mark.parametrize("platform", ["slack", "discord", "console"])
async def test_a_choice_by_someone_not_allowed_is_refused(settings, platform) -> None:
    model = story()
    async with on(platform, settings, model) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        asked = thread.message("❓ Which database?")
        mallory = MALLORY[platform]
        if platform == "slack":
            thread.ws.api.add_user(mallory, "mallory")
        await react(thread, asked, 1, by=mallory)
        if platform != "console":
            await press(thread, asked, "1) staging", by=mallory)
            await thread.settle()

        named = mallory if platform == "console" else f"<@{mallory}>"
        refusal = f"Only the requester or an approver can decide this, {named}."
        said = thread.posts()
        assert said.count(refusal) == (1 if platform == "console" else 2)
        snap = await thread.snapshot()
        assert str(snap.status) == "waiting(question)"
        assert snap.requests[0].state is RequestState.OPEN
        assert len(model.requests) == 1  # the model heard nothing
        shown = thread.shown(asked)
        assert shown.text.startswith("❓ Which database? — press a button")
        assert "1) staging" in shown.buttons


@pytest.mark.parametrize("platform", ["slack", "console"])
async def test_a_second_choice_hears_it_was_decided(settings, platform) -> None:
    model = ScriptedModel([asks(), finish("Done.")])
    async with on(platform, settings, model) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        asked = thread.message("❓ Which database?")
        await react(thread, asked, 1, by=who(platform, "alice"))
        await react(thread, asked, 2, by=who(platform, "bob"))

        name = thread.name("bob")
        assert f"This was already decided, {name}." in thread.posts()
        assert answer_read(model).endswith("chose option 1: staging")


# --- the model's side -------------------------------------------------------------------


async def test_more_than_nine_options_are_refused_to_the_model_with_the_reason(
    settings,
) -> None:
    model = ScriptedModel([asks([f"option {n}" for n in range(1, 11)]), finish("Asked in words.")])
    async with on("console", settings, model) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        last = model.requests[-1].messages[-1]["content"]
        [result] = [b for b in last if b.get("type") == "tool_result"]
        assert result["is_error"] is True
        assert result["content"] == (
            "`options` may hold at most 9 choices, got 10: ask again with 9 or fewer, "
            "or ask in words without options"
        )
        assert not any("❓" in p for p in thread.posts())
        assert (await thread.snapshot()).status.lifecycle is Lifecycle.DONE


# --- Discord's form -----------------------------------------------------------------------


async def test_discord_answer_in_words_opens_a_modal_first_and_its_submit_answers(
    settings,
) -> None:
    model = story()
    async with on("discord", settings, model) as thread:
        assert isinstance(thread, DiscordThread)
        g = thread.g
        await thread.mention("set up the test database")
        await thread.settle()
        asked = thread.message("❓ Which database?")
        held = g.fake.messages[asked]

        opener = g.interaction_d("interaction_create_button", thread.thread)
        opener["member"]["user"].update(id=PEOPLE["discord"]["alice"])
        opener["message"] = copy.deepcopy(held)
        custom_id = buttons(held)[ANSWER_LABEL]
        opener["data"] = {"custom_id": custom_id, "component_type": 2}
        await g.dispatch("INTERACTION_CREATE", opener)

        [callback] = g.fake.interactions[str(opener["id"])].callbacks  # the first answer
        assert callback["type"] == 9  # MODAL
        modal = callback["data"]
        assert modal["custom_id"] == custom_id
        assert modal["title"] == "Which database?"
        [[field]] = [row["components"] for row in modal["components"]]
        assert field["type"] == 4 and field["custom_id"] == "answer" and field["required"]
        assert field["placeholder"].startswith("Or a number: 1) staging · 2) shared, with a lock")
        assert len(field["placeholder"]) <= 100
        assert str((await thread.snapshot()).status) == "waiting(question)"  # nothing yet

        submit = g.interaction_d("interaction_create_button", thread.thread)
        submit["member"]["user"].update(id=PEOPLE["discord"]["alice"])
        submit["type"] = 5  # MODAL_SUBMIT
        submit["message"] = copy.deepcopy(g.fake.messages[asked])
        field_value = {"type": 4, "custom_id": "answer", "value": "the one in docker"}
        submit["data"] = {
            "custom_id": custom_id,
            "components": [{"type": 1, "components": [field_value]}],
        }
        await g.dispatch("INTERACTION_CREATE", submit)
        await thread.settle()

        [deferred] = g.fake.interactions[str(submit["id"])].callbacks
        assert deferred["type"] == 6  # nothing changes on screen; the edit says it
        name = thread.name("alice")
        assert answer_read(model) == f"{name} answered: the one in docker"
        shown = thread.shown(asked)
        assert shown.text.startswith(f"💬 {name} answered: the one in docker\n❓ Which database?")
        assert shown.buttons == []
        assert (await thread.snapshot()).status.lifecycle is Lifecycle.DONE


# --- the pure parts -----------------------------------------------------------------------


def test_a_choice_fits_a_button_and_decodes_back() -> None:
    longest = "r" * 64
    for action in (ChooseButton(request=longest, option=9), AnswerButton(request=longest)):
        value = encode(action)
        assert len(value) <= MAX_CHARS
        assert decode(value) == action
    assert decode('tb1:{"k":"choose","r":"r1","o":10}') is None  # options are 1 to 9


@pytest.mark.parametrize(
    ("raw", "name", "number"),
    [("1️⃣", "one", 1), ("9\u20e3", "nine", 9), (":two:", "two", 2), ("+1", "+1", None)],
)
def test_number_reactions_are_named_as_slack_names_them(raw, name, number) -> None:
    assert normalize(raw) == name
    assert emoji_number(normalize(raw)) == number


def test_the_form_is_built_from_the_message_alone_and_cut_to_discords_limits() -> None:
    question = "Which of these databases should the integration tests use from now on?"
    choices = [f'tb1:{{"k":"choose","r":"r1","o":{n}}}' for n in (1, 2)]
    answer = encode(AnswerButton(request="r1"))
    d: dict[str, Any] = {
        "type": 3,
        "data": {"custom_id": answer, "component_type": 2},
        "message": {
            "content": f"❓ {question} — press a button, react 1️⃣-2️⃣ or reply in this thread",
            "components": [
                {
                    "type": 1,
                    "components": [
                        {"type": 2, "label": "1) " + "a" * 78, "custom_id": choices[0]},
                        {"type": 2, "label": "2) b", "custom_id": choices[1]},
                        {"type": 2, "label": ANSWER_LABEL, "custom_id": answer},
                    ],
                }
            ],
        },
    }
    modal = answer_modal(d)
    assert modal is not None and modal["type"] == 9
    assert modal["data"]["title"] == question[:44] + "…"
    [[field]] = [row["components"] for row in modal["data"]["components"]]
    assert len(field["placeholder"]) == 100 and field["placeholder"].endswith("…")
    assert ANSWER_LABEL not in field["placeholder"]
    d["data"]["custom_id"] = choices[0]
    assert answer_modal(d) is None  # a choice is a press, not a form
    submit = {
        "custom_id": answer,
        "components": [
            {"type": 18, "component": {"type": 4, "custom_id": "answer", "value": " 2 "}}
        ],
    }
    assert submitted_text(submit) == "2"  # a label (type 18) holds the input in newer modals
    assert submitted_text({"custom_id": "other", "components": []}) is None


@pytest.mark.parametrize("platform", ["slack", "discord"])
async def test_a_stopped_question_loses_its_buttons(settings, platform) -> None:
    async with on(platform, settings, story()) as thread:
        await thread.mention("set up the test database")
        await thread.settle()
        asked = thread.message("❓ Which database?")
        await thread.stop(by="alice")
        await thread.settle()

        shown = thread.shown(asked)
        assert shown.text.startswith(f"⏹ Stopped by {thread.name('alice')}\n❓ Which database?")
        assert shown.buttons == []
        assert (await thread.snapshot()).status.lifecycle is Lifecycle.CANCELLED


def test_an_option_is_one_line_however_the_model_wrote_it() -> None:
    """A label with line breaks would print as extra numbered lines (``3) fake``)."""
    call = parse(
        "ask_user",
        {"question": "Which?", "options": ["line one\nline two\n3) fake", "  b\t c ", " \n "]},
    )
    assert isinstance(call, AskUser)
    assert call.options == ["line one line two 3) fake", "b c"]
