"""The commands of a chain, read as the shell quotes them (strict: for ``allow`` rules).

:func:`chain_parts` splits a command line where the shell would start another
command, and nowhere else: outside quotes and backslash escapes, and inside double
quotes only at a command substitution. An ``allow`` rule covers a command line only
when every part starts with its prefix (:func:`core.policy.matching.prefix_matches`),
so a part read too few fails closed; what this reader cannot follow (unpaired
quotes, a here-document) falls back to splitting at every separator, quoted or not.
The generous readings for ``deny`` and ``ask`` are :mod:`core.policy.commands`.
Quoting as in the POSIX shell specification, "2.2 Quoting" and "2.3 Token
Recognition" (comments).
"""

from __future__ import annotations

import re

SEPARATORS = r"[;&|(){}`\n\r]|(?<![\w-])-(?:exec|execdir|ok|okdir)(?![\w-])"
CHAIN = re.compile(SEPARATORS)
"""Where a command may start, read generously: every separator, quoted or not."""
_EXEC_AT = re.compile(r"(?<![\w-])-(?:exec|execdir|ok|okdir)(?![\w-])")


def squash(text: str) -> str:
    """``text`` with every run of whitespace made one space, trimmed."""
    return " ".join(text.split())


_CONTINUATION = re.compile(r"(?<!\\)((?:\\\\)*)\\\n")


def joined_lines(text: str) -> str:
    """``text`` with each line continuation (a backslash that is not itself escaped,
    then a newline) removed, as the shell removes it: ``r\\<newline>m`` is ``rm``,
    while after ``\\\\`` (an escaped backslash) the newline still ends the command
    (POSIX shell specification, "2.2.1 Escape Character (Backslash)")."""
    return _CONTINUATION.sub(r"\1", text)


def chain_parts(command: str) -> list[str]:
    """The commands of a chain (``a && b``), squashed, read as the shell quotes them.

    Split at every separator outside quotes and backslash escapes; inside double
    quotes only where a command substitution (``$(...)``, a backtick) starts or ends;
    inside single quotes never. So ``python3 -c "print(1)"`` and ``pytest -k "a or
    (b)"`` are one command each, while ``echo "$(curl x)"`` is two (``curl x`` one of
    them). Quotes that do not pair up fall back to splitting at every separator,
    quoted or not: what cannot be read is read as the most commands (an ``allow``
    rule, the only user, then fails closed). Quoting as in the POSIX shell
    specification, "2.2 Quoting".
    """
    parts = _quoted_split(command)
    if parts is None:
        parts = CHAIN.split(joined_lines(command))
    return [squashed for part in parts if (squashed := squash(part))]


def _quoted_split(text: str) -> list[str] | None:
    """``text`` split at separators the shell reads as such; None for what it does not
    read (unpaired quotes, a here-document).

    A stack of contexts: ``"`` (inside double quotes), ``)`` and `````` (inside a
    command substitution, which ends at that character); the bottom is the command
    line itself. A backslash escapes the next character (a newline after it
    continues the line); ``'...'`` and ``$'...'`` (where a backslash escapes a
    quote) are inert; a ``#`` that begins a word begins a comment, to the end of
    its line. Parts keep their quotes and backslashes as written.
    """
    parts: list[str] = []
    start = 0
    stack: list[str] = []
    index = 0

    def cut(at: int, resume: int) -> None:
        nonlocal start
        parts.append(text[start:at])
        start = resume

    while index < len(text):
        char = text[index]
        inside = stack[-1] if stack else ""
        if char == "\\":
            index += 2
            continue
        if inside == '"':
            if char == '"':
                stack.pop()
            elif char == "`" or text.startswith("$(", index):
                step = 1 if char == "`" else 2
                cut(index, index + step)
                stack.append("`" if char == "`" else ")")
                index += step
                continue
            index += 1
            continue
        if char == "'" or text.startswith("$'", index):
            end = _quote_end(text, index)
            if end is None:
                return None
            index = end + 1
            continue
        if char == "#" and (index == 0 or text[index - 1] in _BEFORE_WORD):
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline  # the newline still ends it
            continue
        if text.startswith("<<", index):
            return None  # a here-document's lines are data: not read here
        if char == '"':
            stack.append('"')
        elif inside and char == inside:
            stack.pop()
            cut(index, index + 1)
        elif char in "()":
            if char == "(":
                stack.append(")")
            cut(index, index + 1)
        elif char == "`":
            stack.append("`")
            cut(index, index + 1)
        else:
            exec_word = _EXEC_AT.match(text, index)
            if exec_word is not None:
                cut(index, exec_word.end())
                index = exec_word.end()
                continue
            if char in ";&|{}\n\r":
                cut(index, index + 1)
        index += 1
    if stack and stack != [")"] * len(stack):
        return None
    parts.append(text[start:])
    return parts


_BEFORE_WORD = frozenset(" \t\n\r;&|()`")
"""Characters after which a ``#`` begins a word (and so a comment)."""


def _quote_end(text: str, index: int) -> int | None:
    """Where the ``'...'`` (or ANSI-C ``$'...'``) quote that starts at ``index`` ends;
    None when it does not (inside ``$'...'`` a backslash escapes a quote)."""
    if text[index] == "'":
        end = text.find("'", index + 1)
        return None if end < 0 else end
    at = index + 2
    while at < len(text):
        if text[at] == "\\":
            at += 2
        elif text[at] == "'":
            return at
        else:
            at += 1
    return None
