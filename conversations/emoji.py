"""One name per emoji, whichever platform or keyboard it came from.

Slack names reactions by shortcode without colons (``white_check_mark``, ``+1``),
with a ``::skin-tone-N`` suffix for a skin tone
(https://docs.slack.dev/reference/events/reaction_added). Discord sends the unicode
character itself in the emoji object's ``name`` (``id`` is null for a standard
emoji; a custom emoji has an ``id`` and its own name)
(https://discord.com/developers/docs/resources/emoji#emoji-object). The console
takes either form. :func:`normalize` maps all of them to the Slack shortcode name,
which is what :class:`conversations.events.ReactionChanged` carries and what the
hub compares against; :func:`to_unicode` turns a name back into a character for
display.
"""

from __future__ import annotations

import re

_VARIATION_SELECTOR = "\ufe0f"
_SKIN_TONES = re.compile("[\U0001f3fb-\U0001f3ff]")
_SLACK_SKIN_TONE = re.compile(r"::skin-tone-\d+$")

NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
"""The names of the number reactions 1️⃣-9️⃣ (keycaps: digit, U+FE0F, U+20E3), in order:
Slack's shortcodes (``:one:`` ... ``:nine:``)."""


def number(name: str) -> int | None:
    """The number (1-9) a normalized reaction ``name`` shows (``"two"`` is 2); None for
    any other reaction."""
    return NUMBERS.index(name) + 1 if name in NUMBERS else None


_DISPLAY: dict[str, str] = {
    "white_check_mark": "✅",
    "heavy_check_mark": "✔️",
    "ballot_box_with_check": "☑️",
    "x": "❌",
    "heavy_multiplication_x": "✖️",
    "+1": "👍",
    "-1": "👎",
    "eyes": "👀",
    "octagonal_sign": "🛑",
    "black_square_for_stop": "⏹️",
    "repeat": "🔁",
    **{name: f"{n}\ufe0f\u20e3" for n, name in enumerate(NUMBERS, start=1)},
}
"""Shortcode name -> the character shown for it (with U+FE0F where one is usual)."""

_NAMES: dict[str, str] = {
    char.replace(_VARIATION_SELECTOR, ""): name for name, char in _DISPLAY.items()
}
"""Unicode character (without U+FE0F) -> shortcode name."""

_ALIASES: dict[str, str] = {"thumbsup": "+1", "thumbsdown": "-1"}


def normalize(raw: str) -> str:
    """Return the canonical shortcode name for ``raw``.

    ``raw`` is a unicode emoji (``"✅"``, ``"👍🏽"``), a shortcode with or without
    colons (``":x:"``, ``"thumbsup"``), or a Slack name with a skin tone
    (``"+1::skin-tone-3"``). Surrounding whitespace and colons, U+FE0F variation
    selectors, skin-tone modifiers (U+1F3FB..U+1F3FF) and ``::skin-tone-N`` are
    removed; the characters of a small table (✅ ✔ ☑ ❌ ✖ 👍 👎 🛑 ⏹ 🔁, the keycaps
    1️⃣-9️⃣) become their
    Slack names and ``thumbsup``/``thumbsdown`` become ``+1``/``-1``. Anything
    else comes back stripped but otherwise as given (an unknown character stays a
    character; case is kept, since Discord custom emoji names are case-sensitive).
    Never raises; an empty or blank ``raw`` gives ``""``.

    >>> normalize("✔️"), normalize(":thumbsup::skin-tone-2:"), normalize("👍🏿")
    ('heavy_check_mark', '+1', '+1')
    """
    text = raw.strip()
    if len(text) > 1 and text.startswith(":") and text.endswith(":"):
        text = text[1:-1]
    text = _SLACK_SKIN_TONE.sub("", text)
    text = _SKIN_TONES.sub("", text.replace(_VARIATION_SELECTOR, "")).strip()
    name = _NAMES.get(text, text)
    return _ALIASES.get(name, name)


def to_unicode(name: str) -> str:
    """Return the character to display for an emoji ``name``, e.g. ``"x"`` -> ``"❌"``.

    ``name`` is normalized first, so aliases and unicode input work too. A name
    outside the table comes back as ``":name:"``; an unknown character (anything
    that is not a plain ASCII shortcode) comes back as itself.
    """
    normal = normalize(name)
    if normal in _DISPLAY:
        return _DISPLAY[normal]
    if not normal or not normal.isascii():
        return normal
    return f":{normal}:"
