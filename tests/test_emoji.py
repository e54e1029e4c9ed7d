"""Every way a person can type or a platform can send an emoji gives one name."""

from __future__ import annotations

import pytest

from conversations.emoji import normalize, to_unicode


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("✅", "white_check_mark"),
        ("✔️", "heavy_check_mark"),
        ("✔", "heavy_check_mark"),
        ("☑️", "ballot_box_with_check"),
        ("☑", "ballot_box_with_check"),
        ("❌", "x"),
        ("✖️", "heavy_multiplication_x"),
        ("👍", "+1"),
        ("👎", "-1"),
        ("🛑", "octagonal_sign"),
        ("⏹️", "black_square_for_stop"),
        ("⏹", "black_square_for_stop"),
        ("🔁", "repeat"),
    ],
)
def test_table_characters_become_slack_names(raw: str, name: str) -> None:
    assert normalize(raw) == name


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("white_check_mark", "white_check_mark"),
        (":white_check_mark:", "white_check_mark"),
        (":x:", "x"),
        ("x", "x"),
        ("  :x:  ", "x"),
        ("thumbsup", "+1"),
        (":thumbsup:", "+1"),
        ("thumbsdown", "-1"),
        ("+1", "+1"),
        (":-1:", "-1"),
    ],
)
def test_shortcodes_with_or_without_colons(raw: str, name: str) -> None:
    assert normalize(raw) == name


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        ("👍🏽", "+1"),
        ("👍🏻", "+1"),
        ("👎🏿", "-1"),
        ("+1::skin-tone-2", "+1"),
        (":+1::skin-tone-6:", "+1"),
        ("thumbsup::skin-tone-3", "+1"),
        ("wave::skin-tone-4", "wave"),
    ],
)
def test_skin_tones_are_dropped(raw: str, name: str) -> None:
    assert normalize(raw) == name


def test_unknown_unicode_comes_back_stripped() -> None:
    assert normalize("🎉") == "🎉"
    assert normalize(" ❤️ ") == "❤"
    assert normalize("👋🏾") == "👋"


def test_unknown_shortcode_keeps_its_case() -> None:
    assert normalize(":PartyParrot:") == "PartyParrot"
    assert normalize("tada") == "tada"


def test_blank_is_empty() -> None:
    assert normalize("") == ""
    assert normalize("  ") == ""
    assert normalize("::") == ""


@pytest.mark.parametrize(
    ("name", "char"),
    [
        ("white_check_mark", "✅"),
        ("heavy_check_mark", "✔️"),
        ("ballot_box_with_check", "☑️"),
        ("x", "❌"),
        ("heavy_multiplication_x", "✖️"),
        ("+1", "👍"),
        ("-1", "👎"),
        ("octagonal_sign", "🛑"),
        ("black_square_for_stop", "⏹️"),
        ("repeat", "🔁"),
        ("thumbsup", "👍"),
        (":x:", "❌"),
    ],
)
def test_to_unicode_is_the_inverse_of_the_table(name: str, char: str) -> None:
    assert to_unicode(name) == char
    assert normalize(to_unicode(name)) == normalize(name)


def test_to_unicode_unknown() -> None:
    assert to_unicode("tada") == ":tada:"
    assert to_unicode("🎉") == "🎉"
