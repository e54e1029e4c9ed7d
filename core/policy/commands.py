"""Reading shell command lines for the tool policy (:mod:`core.policy.policy`).

Two generous readings, both best effort: a guard, not a shell.

* :func:`command_starts`: every text that could be where a command starts: the
  beginning, after ``;``, ``&``, ``|``, ``(``, ``{``, a backtick, a quote, a newline
  or ``-exec``, and after wrappers such as ``env``, ``xargs``, ``timeout 10``,
  ``VAR=x`` or ``then``; quotes and backslashes are read as the shell joins them
  (``'r'm -rf`` is ``rm -rf``). Policy patterns match these as text prefixes.
* :func:`command_words`: every list of words that could be one simple command: the
  command line and each of those texts split with :mod:`shlex` (plain whitespace
  where the quotes do not pair up), cut at control operators, redirections dropped,
  leading wrappers, assignments and options stepped over.
  :meth:`CommandPattern.find` reads a pattern structurally in such a list: ``rm -rf``
  is found in ``rm -f -r d`` and ``rm -vrf d``, ``git push`` in ``git -C . push``,
  ``chmod -R`` in ``chmod 777 -R .``.

Both err towards finding: ``echo "x; curl"`` has a command start at ``curl``. The
strict reading, for ``allow`` rules, is :mod:`core.policy.chains`.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from core.policy.chains import CHAIN, SEPARATORS, joined_lines, squash

_CHAIN_OR_QUOTE = re.compile(SEPARATORS + r"|[\"']")
_WRAPPERS = (
    "then|do|else|elif|if|while|until|time|nohup|exec|command|builtin|env|xargs|nice|ionice|"
    "stdbuf|timeout|watch|setsid|unbuffer|strace|chroot|doas|sudo|su|runuser|eval"
)
_WRAPPER_NAMES = frozenset(_WRAPPERS.split("|"))
_LEAD = re.compile(
    rf"(?:[!{{}}()]|(?:{_WRAPPERS})(?=\s|$)|-\S*|\d\S*|[A-Za-z_]\w*=\S*|\S*/(?=\S))\s*"
)
_MAX_STRIPS = 32

_OPERATOR_CHARS = "();<>|&`\n"
_ENDS_COMMAND = frozenset(";|&()`\n")
_REDIRECT_CHARS = frozenset("<>&|")
_EXEC_WORDS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_LEAD_WORDS = frozenset({"!", "{", "}", "(", ")"})
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")
_CLUSTER = re.compile(r"-[A-Za-z0-9]+")
_VERSION = re.compile(r"(?<=[A-Za-z])[\d.]+$")
_SINGLE_DASH_PROGRAMS = frozenset({"find"})
"""Programs whose ``-name`` words are whole options, not clusters of letters."""


def command_starts(command: str) -> Iterator[str]:
    """Every text that could be where a command starts, whitespace squashed (generous)."""
    text = joined_lines(command).replace("\\", "")
    yield squash(text)
    for part in _pieces(text):
        yield from _unwrapped(part)


def command_words(command: str) -> Iterator[tuple[str, ...]]:
    """Every list of words that could be one simple command, program first (generous)."""
    text = joined_lines(command)
    sources = dict.fromkeys([text, *_pieces(text.replace("\\", ""))])
    seen: set[tuple[str, ...]] = set()
    for source in sources:
        for words in _simple_commands(_tokens(source)):
            for unwrapped in _unwrapped_words(words):
                if unwrapped not in seen:
                    seen.add(unwrapped)
                    yield unwrapped


def program_name(word: str) -> str:
    """The program a word runs: ``/usr/bin/python3.11`` -> ``python``."""
    name = posixpath.basename(word) or word
    return _VERSION.sub("", name)


@dataclass(frozen=True)
class CommandPattern:
    """A pattern read as words: ``git -C x push`` is program ``git``, option ``-C``,
    operands ``x push``."""

    program: str
    options: tuple[str, ...]
    operands: tuple[str, ...]

    def find(self, words: Sequence[str]) -> tuple[str, ...] | None:
        """The words of a simple command that make it this pattern, or None.

        The program must match (path and version aside); each option must be among
        the arguments before ``--``, anywhere (``-rf`` also as letters of several
        clusters: ``-f -r``, ``-vrf``; ``--recursive`` also abbreviated); the operands
        must follow in order, with only options, and one value after each option, in
        between (``git -C . push`` is ``git push``). Returns the program and the
        words that matched, as written, e.g. ``("rm", "-f", "-r")``.
        """
        if not words or program_name(words[0]) != self.program:
            return None
        arguments = list(words[1:])
        if "--" in arguments:
            arguments = arguments[: arguments.index("--")]
        option_at = self._options_at(arguments, clusters=self.program not in _SINGLE_DASH_PROGRAMS)
        operands_end = self._operands_end(arguments)
        if option_at is None or operands_end is None:
            return None
        shown = option_at | set(range(operands_end))
        return (words[0], *(arguments[index] for index in sorted(shown)))

    def _options_at(self, arguments: Sequence[str], *, clusters: bool) -> set[int] | None:
        """Where the arguments give each of the pattern's options; None when one lacks."""
        found: set[int] = set()
        for option in self.options:
            at = {i for i, argument in enumerate(arguments) if _same_option(argument, option)}
            if not at and clusters and _CLUSTER.fullmatch(option):
                needed = set(option[1:])
                at = {
                    i
                    for i, argument in enumerate(arguments)
                    if _CLUSTER.fullmatch(argument) and needed & set(argument[1:])
                }
                if not needed <= {letter for i in at for letter in arguments[i][1:]}:
                    return None
            if not at:
                return None
            found |= at
        return found

    def _operands_end(self, arguments: Sequence[str]) -> int | None:
        """The index after the last operand, 0 for none; None when they do not follow."""
        if not self.operands:
            return 0
        position = 0
        value_may_follow = False
        for index, argument in enumerate(arguments):
            if argument == self.operands[position]:
                position += 1
                if position == len(self.operands):
                    return index + 1
                value_may_follow = False
            elif _is_option(argument):
                value_may_follow = "=" not in argument
            elif value_may_follow:
                value_may_follow = False
            else:
                return None
        return None


@lru_cache(maxsize=512)
def parse_pattern(pattern: str) -> CommandPattern | None:
    """``pattern`` as a :class:`CommandPattern`; None when it has no words."""
    words = _split(pattern)
    if not words:
        return None
    rest = words[1:]
    return CommandPattern(
        program=program_name(words[0]),
        options=tuple(word for word in rest if _is_option(word)),
        operands=tuple(word for word in rest if not _is_option(word)),
    )


# --- texts ------------------------------------------------------------------------


def _pieces(text: str) -> Iterator[str]:
    """The parts of ``text`` between separators, and between separators or quotes."""
    yield from CHAIN.split(text.replace('"', "").replace("'", ""))
    yield from _CHAIN_OR_QUOTE.split(text)


def _unwrapped(part: str) -> Iterator[str]:
    """``part`` and what is left after each leading wrapper, option, assignment or
    directory (``/usr/bin/curl`` -> ``curl``)."""
    rest = squash(part)
    for _ in range(_MAX_STRIPS):
        if not rest:
            return
        yield rest
        lead = _LEAD.match(rest)
        if lead is None or not lead.end():
            return
        rest = rest[lead.end() :]


# --- words ------------------------------------------------------------------------


def _split(text: str) -> list[str]:
    """Words as the shell splits them; plain whitespace when the quotes do not pair."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _tokens(text: str) -> list[str]:
    """Words and control operators (``;``, ``&&``, ``|``, ``>`` ...) of ``text``."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_OPERATOR_CHARS)
    lexer.whitespace_split = True
    lexer.whitespace = " \t\r"
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        operators = "|".join(re.escape(char) for char in _OPERATOR_CHARS)
        return [
            token
            for piece in re.split(f"((?:{operators})+)", text)
            for token in (
                [piece] if piece and set(piece) <= set(_OPERATOR_CHARS) else piece.split()
            )
        ]


def _simple_commands(tokens: Sequence[str]) -> Iterator[list[str]]:
    """The word lists between control operators; redirections and their targets dropped.

    A ``;`` after ``-exec`` ends the ``-exec`` (``find . -exec ... \\; -delete``).
    """
    words: list[str] = []
    in_exec = False
    drop_next = False
    for token in tokens:
        if token == ";" and in_exec:
            words.append(token)
            in_exec = False
        elif _is_redirect(token):
            if words and words[-1].isdigit():
                words.pop()
            drop_next = True
        elif set(token) <= set(_OPERATOR_CHARS):
            if words:
                yield words
            words, in_exec, drop_next = [], False, False
        elif drop_next:
            drop_next = False
        else:
            words.append(token)
            in_exec = in_exec or token in _EXEC_WORDS
    if words:
        yield words


def _is_redirect(token: str) -> bool:
    return bool({"<", ">"} & set(token)) and set(token) <= _REDIRECT_CHARS


def _unwrapped_words(words: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """``words`` and what is left after leading wrappers, options (and a value after
    each), assignments and numbers: ``sudo -u bob rm -rf x`` also gives ``rm -rf x``."""
    reachable = {0}
    for index in range(min(len(words), _MAX_STRIPS)):
        if index not in reachable:
            continue
        yield tuple(words[index:])
        word = words[index]
        if _is_lead(word):
            reachable.add(index + 1)
            if posixpath.basename(word) in _WRAPPER_NAMES or (_is_option(word) and "=" not in word):
                reachable.add(index + 2)


def _is_lead(word: str) -> bool:
    return (
        word in _LEAD_WORDS
        or posixpath.basename(word) in _WRAPPER_NAMES
        or _is_option(word)
        or word[:1].isdigit()
        or _ASSIGNMENT.match(word) is not None
    )


def _is_option(word: str) -> bool:
    return word.startswith("-") and word != "-"


def _same_option(argument: str, option: str) -> bool:
    """``argument`` is ``option``, with a ``=value``, or a long option abbreviated."""
    if argument == option or argument.startswith(option + "="):
        return True
    name = argument.split("=", 1)[0]
    return (
        option.startswith("--")
        and name.startswith("--")
        and len(name) > 2
        and (option.startswith(name))
    )
