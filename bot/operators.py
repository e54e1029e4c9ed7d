"""Operators: the people named in the settings who may change the bot's state from the CLI
(docs/architecture.md, "Approval scopes").

Each operator is a table of the settings, ``[operators.NAME]``, holding the SHA-256 of
their token, never the token itself::

    [operators.dana]
    token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

``threadbot operator hash`` prints that line for a token (read from
:data:`TOKEN_VARIABLE` or asked at the terminal), or ``printf %s "$TOKEN" | sha256sum``
does. A command that changes state (``threadbot policy revoke``) acts as a named
operator: ``--operator NAME``, and the token from :data:`TOKEN_VARIABLE` or asked at the
terminal, never on the command line (where ``ps`` would show it). The token's hash is
compared with :func:`hmac.compare_digest`, in constant time, and an unknown name is
compared with a hash no token has, so the time taken tells neither
(https://docs.python.org/3/library/hmac.html#hmac.compare_digest). Tokens are random
secrets (``python3 -c 'import secrets; print(secrets.token_urlsafe(32))'``): a fast hash
is enough for them, and :data:`MIN_TOKEN` characters at least are asked for.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import re
import sys
from collections.abc import Callable, Mapping
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

TOKEN_VARIABLE = "THREADBOT_OPERATOR_TOKEN"
"""The environment variable an operator's token is read from (else it is asked)."""
MIN_TOKEN = 16
"""Characters an operator's token has at least."""
_NO_TOKEN = "0" * 64
"""The hash an unknown operator's token is compared with: no token has it."""


def _hex_digest(value: str) -> str:
    lowered = value.strip().lower()
    if len(lowered) != 64 or any(c not in "0123456789abcdef" for c in lowered):
        raise ValueError(
            "must be the SHA-256 of the token, 64 hexadecimal digits "
            "(threadbot operator hash prints it)"
        )
    return lowered


class Operator(BaseModel):
    """One operator's table: ``token_sha256``, the SHA-256 of their token, in hex."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    token_sha256: Annotated[str, AfterValidator(_hex_digest)]


_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
OperatorName = Annotated[str, StringConstraints(pattern=rf"^{_NAME}$")]
"""An operator's name: a word of letters, digits, ``_``, ``.`` or ``-``, at most 64."""


def is_operator_name(text: str) -> bool:
    """Whether ``text`` is, whole, an operator's name (:data:`OperatorName`): what may be
    recorded as one (a name typed at a sign-in may hold escape codes or line breaks)."""
    return re.fullmatch(_NAME, text) is not None


def recorded_name(name: str) -> str:
    """``name`` as the audit trail records an operator who was refused (``operator:<it>``):
    itself when it is a valid operator's name (:func:`is_operator_name`), else ``?``, so no
    text of any shape given on a command line lands in the trail."""
    return name if is_operator_name(name) else "?"


class OperatorRefused(Exception):
    """The command may not act as the operator it names; the message says why, never the
    token."""


def token_sha256(token: str) -> str:
    """The hex SHA-256 of ``token`` (UTF-8), as ``token_sha256`` holds it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def authenticated(operators: Mapping[str, Operator], name: str, token: str) -> str:
    """``name`` when ``token`` is that operator's; raises :class:`OperatorRefused` for no
    operators at all, an unknown name or a wrong token (one message for both, compared in
    constant time)."""
    if not operators:
        raise OperatorRefused(
            "no operators are named in the settings: add [operators.NAME] with "
            "token_sha256 = ... (threadbot operator hash prints it)"
        )
    known = operators.get(name)
    expected = known.token_sha256 if known is not None else _NO_TOKEN
    matches = hmac.compare_digest(token_sha256(token).encode(), expected.encode())
    if known is None or not matches:
        raise OperatorRefused(f"refused: {name!r} is not an operator with this token")
    return name


def token_given(
    environ: Mapping[str, str],
    *,
    ask: Callable[[str], str] | None = None,
    interactive: bool | None = None,
) -> str:
    """The operator's token: :data:`TOKEN_VARIABLE`, else asked at the terminal without an
    echo (``ask``: :func:`getpass.getpass` by default) when the input is one
    (``interactive``: by default whether stdin is a terminal). Raises
    :class:`OperatorRefused` when there is none, or it is shorter than :data:`MIN_TOKEN`."""
    token = environ.get(TOKEN_VARIABLE, "")
    if not token:
        if interactive is None:
            interactive = sys.stdin.isatty()
        if not interactive:
            raise OperatorRefused(
                f"no operator token: set {TOKEN_VARIABLE} (the token is never an argument)"
            )
        token = (ask or getpass.getpass)("operator token: ")
    token = token.strip()
    if len(token) < MIN_TOKEN:
        raise OperatorRefused(
            f"an operator token has {MIN_TOKEN} characters at least (a random secret, e.g. "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return token
