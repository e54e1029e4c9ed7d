"""Pure translators for the console: an input line in, an event or local command out.

The console is one channel (``console`` on platform ``console``, workspace
``""``) where every message, a person's or the bot's, has a short integer id
(``[3]``) and belongs to a thread named by its root's id. Input grammar, one line
each (``N`` is a message id, ``K`` a call number from 1):

==================  =================================================================
``text``            a new top-level message mentioning the bot; its id names the thread
``>N text``         a reply in the thread message ``N`` belongs to
``+EMOJI N``        react to message ``N`` (``✅``, ``white_check_mark`` or ``:x:``)
``-EMOJI N``        remove that reaction
``+EMOJI N.K``      decide call ``K`` of approval request ``N``: ``CommandInvoked``
                    ``decide`` with args ``"N.K <emoji name>"``, its means a reaction
``+✅ N.K run``      allow call ``K`` for the rest of the run (``channel``: always in
                    this channel), as its buttons do: args ``"N.K <emoji> run"``
``+1️⃣ N``          pick option 1 of question ``N`` (a number reaction, 1️⃣-9️⃣);
                    ``>N 2`` (a reply that is only the number) picks option 2
``+👍 N``           feedback on the answer ``N`` (``+👎 N``): a reaction, which the
                    hub takes as feedback on a message that asks for nothing
``/stop [N]``       stop the work (in the thread of ``N``)
``/settings``       show this channel's effective settings: ``CommandInvoked``
                    ``settings`` (the hub answers only to the one who asked)
``/as NAME``        speak as someone else from now on (local)
``/help``           list the commands (local)
``/quit``           end input, like end of file (local)
``\\text``           send ``text`` as a plain message, even if it starts with ``/ > + -``
==================  =================================================================

Nothing here does I/O: :func:`parse_line` reads a :class:`Context` snapshot and
returns what the line means; the runner applies it. :func:`echo` and
:func:`render_message` give the transcript lines.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import assert_never

from conversations.emoji import normalize, to_unicode
from conversations.events import (
    Author,
    Button,
    ButtonPressed,
    CommandInvoked,
    InboundEvent,
    MessagePosted,
    PlatformRef,
    ReactionChanged,
)
from conversations.feedback import feedback_only


def help_lines(stop_command: str = "stop") -> tuple[str, ...]:
    """:data:`HELP` with the configured name of the stop command."""
    if stop_command == "stop":
        return HELP
    stop = f"/{stop_command} [N]".ljust(16)
    return tuple(
        f"{stop}stop the work (in the thread of message N)" if line.startswith("/stop") else line
        for line in HELP
    )


PLATFORM = "console"
CHANNEL = "console"
SETTINGS_COMMAND = "settings"
"""``/settings``: the hub shows the channel's effective settings to whoever asked."""
HELP = (
    "text            start a new conversation with the bot",
    ">N text         reply in the thread of message N",
    "+EMOJI N        react to message N (✅, white_check_mark or :x:); -EMOJI N removes it",
    "+EMOJI N.K      decide call K of approval request N",
    "+✅ N.K run     allow call K for this run (channel: always in this channel)",
    "+1️⃣ N / >N 1     pick option 1 of question N (a reply in words answers it too)",
    "+👍 N / +👎 N    feedback on the answer N (anyone's; only you are told)",
    "/stop [N]       stop the work (in the thread of message N; the name can be configured)",
    "/settings       show this channel's settings (only to you)",
    "/as NAME        speak as NAME from now on",
    "/help           this list",
    "/quit           leave (end of input does the same)",
    "\\text           send text as it is, even if it starts with / > + -",
)

_REPLY = re.compile(r">\s*(\d+)(?:\s+(.*))?")
_REACTION = re.compile(r"([+-])(\S+)\s+(\d+)(?:\.(\d+))?(?:\s+(run|channel))?")
_COMMAND = re.compile(r"/(\S*)\s*(.*)")
_ESCAPE_HINT = "start the line with \\ to send it as text"


@dataclass(frozen=True)
class Context:
    """What :func:`parse_line` needs to know: who types, the next ids, the threads.

    ``roots`` maps every known message id to the id of its thread's root (a root
    maps to itself). ``next_id`` is the id the next message gets; ``next_counter``
    numbers the delivery keys of reactions and commands (``console:r{n}``).
    """

    author: Author
    next_id: int
    next_counter: int
    roots: Mapping[int, int]
    stop_command: str = "stop"
    """The name of the stop command (``/stop`` unless configured otherwise)."""
    session: str = ""
    """Names this console session (the ``workspace`` of every ref, and part of each
    delivery key) so that ids restarting at 1 never collide with an earlier
    session's in a durable store. Not needed with a state file, where ids go on."""

    @property
    def key_prefix(self) -> str:
        """``console:`` or ``console:<session>:``."""
        return f"{PLATFORM}:{self.session}:" if self.session else f"{PLATFORM}:"


@dataclass(frozen=True)
class SwitchUser:
    """``/as NAME``: the person typing is ``console:NAME`` from now on."""

    name: str


@dataclass(frozen=True)
class ShowHelp:
    """``/help``: print :data:`HELP`."""


@dataclass(frozen=True)
class Quit:
    """``/quit``: stop reading input."""


@dataclass(frozen=True)
class Invalid:
    """A line that cannot be sent; ``message`` says why (printed after ``! ``)."""

    message: str


@dataclass(frozen=True)
class Blank:
    """An empty line: nothing to do."""


LocalCommand = SwitchUser | ShowHelp | Quit | Invalid | Blank
Parsed = MessagePosted | ReactionChanged | CommandInvoked | LocalCommand


def author_for(name: str) -> Author:
    """The console person called ``name``: id ``console:<name>``, display name ``name``."""
    return Author(id=f"{PLATFORM}:{name}", name=name)


def person_of(user_id: str | None) -> str | None:
    """The name of the console person with id ``user_id`` (the inverse of :func:`author_for`):
    ``console:alice`` gives ``alice``, an id of another form itself, None gives None."""
    if user_id is None:
        return None
    return user_id.removeprefix(f"{PLATFORM}:")


def parse_line(line: str, ctx: Context) -> Parsed:
    """Translate one input line (trailing newline allowed) into what it means.

    Returns a :data:`conversations.events.InboundEvent` to hand to the hub, or a
    local command; a malformed line, an unknown ``/command`` or an unknown message
    id gives :class:`Invalid` (never raises). A message gets id ``ctx.next_id`` and
    delivery key ``console:<id>``; a reaction or command gets ``console:r<counter>``.
    """
    text = line.strip()
    if not text:
        return Blank()
    first = text[0]
    if first == "\\":
        rest = text[1:].strip()
        return _message(rest, None, ctx) if rest else Invalid("nothing to send after \\")
    if first == ">":
        return _reply(text, ctx)
    if first in "+-":
        return _reaction(text, ctx)
    if first == "/":
        return _command(text, ctx)
    return _message(text, None, ctx)


def _message(text: str, root: int | None, ctx: Context) -> MessagePosted:
    ref = _ref(ctx, thread=root, message=ctx.next_id)
    return MessagePosted(
        delivery_key=f"{ctx.key_prefix}{ctx.next_id}",
        ref=ref,
        author=ctx.author,
        text=text,
        mentions_bot=root is None,
    )


def _reply(text: str, ctx: Context) -> Parsed:
    match = _REPLY.fullmatch(text)
    if match is None:
        return Invalid(f"a reply is >N text, e.g. >3 use one per test ({_ESCAPE_HINT})")
    target, body = int(match[1]), (match[2] or "").strip()
    if target not in ctx.roots:
        return Invalid(f"there is no message [{target}]")
    if not body:
        return Invalid(f"nothing to say in reply to [{target}]")
    return _message(body, ctx.roots[target], ctx)


def _reaction(text: str, ctx: Context) -> Parsed:
    match = _REACTION.fullmatch(text)
    if match is None:
        return Invalid(f"a reaction is +EMOJI N or -EMOJI N, e.g. +✅ 3 ({_ESCAPE_HINT})")
    sign, emoji, target = match[1], normalize(match[2]), int(match[3])
    if not emoji:
        return Invalid(f"no emoji in {text!r}")
    if target not in ctx.roots:
        return Invalid(f"there is no message [{target}]")
    ref = _ref(ctx, thread=ctx.roots[target], message=target)
    key = f"{ctx.key_prefix}r{ctx.next_counter}"
    if match[4] is None and match[5] is not None:
        return Invalid(f"a scope goes with one call, e.g. +✅ {target}.1 {match[5]}")
    if match[4] is None:
        return ReactionChanged(
            delivery_key=key, ref=ref, author=ctx.author, emoji=emoji, added=sign == "+"
        )
    call = int(match[4])
    if sign == "-":
        return Invalid("a decision cannot be taken back; react + to decide a call")
    if call < 1:
        return Invalid(f"calls are numbered from 1, e.g. +✅ {target}.1")
    args = f"{target}.{call} {emoji}" + (f" {match[5]}" if match[5] else "")
    return CommandInvoked(
        delivery_key=key, ref=ref, author=ctx.author, name="decide", args=args, means="reaction"
    )


def _command(text: str, ctx: Context) -> Parsed:
    match = _COMMAND.fullmatch(text)
    assert match is not None  # every line starting with "/" matches
    name, arg = match[1], match[2].strip()
    if name == "help" and not arg:
        return ShowHelp()
    if name == "quit" and not arg:
        return Quit()
    if name == "as":
        if not re.fullmatch(r"[^\s:]+", arg):
            return Invalid("/as takes one name without spaces or colons, e.g. /as alice")
        return SwitchUser(arg)
    if name == ctx.stop_command:
        return _stop(arg, ctx)
    if name == SETTINGS_COMMAND and not arg:
        ref = _ref(ctx, thread=None, message=None)
        key = f"{ctx.key_prefix}r{ctx.next_counter}"
        return CommandInvoked(delivery_key=key, ref=ref, author=ctx.author, name=name)
    if name in ("help", "quit", SETTINGS_COMMAND):
        return Invalid(f"/{name} takes no argument")
    return Invalid(f"unknown command /{name} (try /help; {_ESCAPE_HINT})")


def _stop(arg: str, ctx: Context) -> Parsed:
    key = f"{ctx.key_prefix}r{ctx.next_counter}"
    if not arg:
        ref = _ref(ctx, thread=None, message=None)
        return CommandInvoked(delivery_key=key, ref=ref, author=ctx.author, name=ctx.stop_command)
    if not arg.isdigit():
        return Invalid(f"/{ctx.stop_command} takes a message id, e.g. /{ctx.stop_command} 3")
    if int(arg) not in ctx.roots:
        return Invalid(f"there is no message [{int(arg)}]")
    root = ctx.roots[int(arg)]
    ref = _ref(ctx, thread=root, message=None)
    return CommandInvoked(
        delivery_key=key, ref=ref, author=ctx.author, name=ctx.stop_command, args=str(root)
    )


def _ref(ctx: Context, *, thread: int | None, message: int | None) -> PlatformRef:
    return PlatformRef(
        platform=PLATFORM,
        workspace=ctx.session,
        channel=CHANNEL,
        thread=None if thread is None else str(thread),
        message=None if message is None else str(message),
        user=ctx.author.id,
    )


# --- transcript ------------------------------------------------------------------


_FENCE = re.compile(r"```[\w+-]*")
"""A Markdown code fence line: three backticks, maybe a language name."""


def render_message(
    message_id: int | str,
    thread: str | None,
    name: str,
    text: str,
    *,
    edited: bool = False,
    buttons: Sequence[Button] = (),
    reactions: Sequence[str] = (),
    only_to: str | None = None,
) -> list[str]:
    """The transcript lines of one message, without newlines.

    Top level (``thread`` None): ``[1] you: text``; in a thread:
    ``  [2] ↳1 threadbot: text``; a message for one person (``only_to``, a name):
    ``[3] threadbot (only to alice): text``. Further lines of ``text`` are indented
    four spaces past the first; buttons (``[Approve] [Reject]``; not the feedback
    buttons: a 👍 or 👎 reaction on the answer gives feedback here) and the seeded
    ``reactions`` (names, shown as ``(reactions: ✅ ❌)``) go on one last line. A
    terminal shows no Markdown, so the fence lines of a code block (three backticks,
    maybe a language) are left out; the indent already sets its lines apart.
    """
    indent = "" if thread is None else "  "
    where = "" if thread is None else f"↳{thread} "
    label = f"{name} (edited)" if edited else name
    if only_to is not None:
        label = f"{label} (only to {only_to})"
    shown = [line for line in text.split("\n") if not _FENCE.fullmatch(line.strip())]
    first, *rest = shown or [""]
    lines = [f"{indent}[{message_id}] {where}{label}: {first}".rstrip()]
    more = indent + "    "
    lines += [(more + line).rstrip() for line in rest]
    # the console has no buttons: feedback is a 👍 / 👎 reaction on the answer
    extras = [f"[{button.label}]" for button in buttons if not feedback_only((button,))]
    if reactions:
        extras.append("(reactions: " + " ".join(to_unicode(r) for r in reactions) + ")")
    if extras:
        lines.append(more + " ".join(extras))
    return lines


def render_reaction(target: str, in_thread: bool, added: bool, emoji: str, name: str) -> str:
    """One reaction line: ``  [2] +✅ threadbot`` (indented when ``in_thread``)."""
    indent = "  " if in_thread else ""
    sign = "+" if added else "-"
    return f"{indent}[{target}] {sign}{to_unicode(emoji)} {name}"


def echo(event: InboundEvent, roots: Mapping[int, int]) -> list[str]:
    """The transcript lines for what a person sent (``event`` from :func:`parse_line`).

    ``roots`` (message id to thread root) tells whether a reaction's target is in a
    thread; a message's own line needs only its ref.
    """
    ref, name = event.ref, event.author.name
    match event:
        case MessagePosted():
            return render_message(ref.message or "?", ref.thread, name, event.text)
        case ReactionChanged():
            target = ref.message or "?"
            return [
                render_reaction(target, in_thread(target, roots), event.added, event.emoji, name)
            ]
        case CommandInvoked(name="decide"):
            call, _, rest = event.args.partition(" ")
            emoji, _, scope = rest.partition(" ")
            shown = render_reaction(call, in_thread(ref.message, roots), True, emoji, name)
            return [f"{shown} ({scope})" if scope else shown]
        case CommandInvoked():
            command = f"/{event.name} {event.args}".rstrip()
            if ref.thread is None:
                return [f"{name}: {command}"]
            return [f"  ↳{ref.thread} {name}: {command}"]
        case ButtonPressed():  # the console has no buttons; shown if a test sends one
            return [f"{name} pressed {event.action}"]
        case _:
            assert_never(event)


def in_thread(message: str | None, roots: Mapping[int, int]) -> bool:
    """Whether message ``message`` (an id as str) is a reply inside a thread.

    False for a top-level message (a thread root) and for an id not in ``roots``.
    """
    if message is None or not message.isdigit():
        return False
    return roots.get(int(message), int(message)) != int(message)
