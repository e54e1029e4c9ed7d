"""Settings errors as a person can act on them: where the value came from, why, what fits.

pydantic's own report (``1 validation error for Settings ... [type=int_parsing,
input_value='abc', ...]``) names a model field and a pydantic error type. A
person set an environment variable or a key of ``threadbot.toml``, so each error
is told as one line naming that place, the reason and the values allowed::

    THREADBOT_STEP_TURN_LIMIT ('abc'): must be a whole number
    threadbot.toml: progress_mode ('x'): must be one of 'replies', 'status'
    threadbot.toml: policy.rules[1].tool: no tool called 'nope'; known: ...

Values of secret settings (tokens, keys) are never shown. Error types follow
https://docs.pydantic.dev/latest/errors/validation_errors/.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, SecretStr, ValidationError
from pydantic_core import ErrorDetails
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from bot.secret_files import file_variable

_REASONS: Mapping[str, str] = {
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a table",
    "missing": "is required",
    "json_invalid": "is not valid JSON",
    "url_parsing": "is not a URL",
}


def explain(
    exc: ValidationError,
    *,
    fields: Mapping[str, Any],
    environ: Mapping[str, str],
    toml_file: Path,
) -> list[str]:
    """One line per error of ``exc`` (a ``Settings`` validation error).

    ``fields`` is ``Settings.model_fields``; ``environ`` the environment the settings
    were read from; ``toml_file`` the TOML file they may have come from instead.
    """
    return [_line(error, fields, environ, toml_file) for error in exc.errors(include_url=False)]


def _line(
    error: ErrorDetails, fields: Mapping[str, Any], environ: Mapping[str, str], toml_file: Path
) -> str:
    loc = tuple(error["loc"])
    name = _field_name(str(loc[0]), fields) if loc else ""
    loc = (name, *loc[1:]) if loc else loc
    reason = _reason(error, fields)
    if error["type"] == "extra_forbidden":
        key = str(loc[-1])
        from bot.settings import OLD_NAMES

        if len(loc) > 1 and key in OLD_NAMES:  # a layer never took the old name
            return f"{toml_file}: {_dotted(loc)}: the old name of {OLD_NAMES[key]}: set that"
        if len(loc) > 1 and key in fields and key not in _layer_fields():  # the bot's alone
            return (
                f"{toml_file}: {_dotted(loc)}: a setting of the whole bot, not of a workspace, "
                f"guild or channel: set {key} at the top of the file or in the environment"
            )
        known = fields if len(loc) == 1 else _layer_fields()
        return (
            f"{toml_file}: {_dotted(loc)}: not a setting threadbot knows{_suggest(loc[-1], known)}"
        )
    if not loc:  # a check of the settings as a whole: its input is every setting
        return f"threadbot settings: {reason}"
    variable = _variable(name, fields.get(name), environ)
    secret = _is_secret(fields.get(name))
    if variable is not None:
        place = variable if secret else f"{variable} ({_shown(name, environ[variable])})"
        return f"{place}: {reason}"
    if reason.startswith((f"{name}.", f"{name}[", f"{name}:")):
        return f"{toml_file}: {reason}"  # the reason names its own dotted path
    last = str(loc[-1]) if loc else ""
    if len(loc) > 1 and reason.startswith((f"{last}.", f"{last}[")):
        return f"{toml_file}: {_dotted(loc[:-1])}.{reason}"  # a layer's own path after it
    shown = "" if secret or len(loc) > 1 else f" ({_shown(name, error.get('input'))})"
    return f"{toml_file}: {_dotted(loc)}{shown}: {reason}"


_NOT_SHOWN = frozenset(
    {"slack", "discord", "organisations", "policy", "instructions", "operators", "schedules"}
)
"""Settings whose whole value is too much to show in an error (and may hold a secret: a
repository URL's credentials in a layer, an operator's token pasted in the wrong
shape)."""


def _shown(name: str, value: object) -> str:
    """``value`` as it may be shown: a database URL without its password, a repository
    URL without what precedes its ``@``, tables not at all."""
    if name in _NOT_SHOWN or isinstance(value, dict):
        return "value not shown"
    if name == "git_repo" and isinstance(value, str):
        from bot.layers import repo_shown

        return repr(repo_shown(value))
    if name == "database_url" and isinstance(value, str):
        try:
            value = make_url(value).render_as_string(hide_password=True)
        except ArgumentError:
            value = "(not a URL)"
    return repr(value)


def _reason(error: ErrorDetails, fields: Mapping[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in _REASONS:
        return _REASONS[kind]
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        word = {
            "greater_than": "greater than",
            "greater_than_equal": "at least",
            "less_than": "less than",
            "less_than_equal": "at most",
        }[kind]
        bound = next(iter(ctx.values()), "")
        return f"must be {word} {bound}"
    message = str(error["msg"])
    return message.removeprefix("Value error, ")


def _field_name(key: str, fields: Mapping[str, Any]) -> str:
    """The setting that ``key`` of an error's location names: pydantic names a setting
    read through one of its aliases (``SLACK_BOT_TOKEN``) by that alias."""
    if key in fields:
        return key
    for name, field in fields.items():
        alias = getattr(field, "validation_alias", None)
        if isinstance(alias, AliasChoices) and key in alias.choices:
            return name
    return key


def _variable(name: str, field: Any, environ: Mapping[str, str]) -> str | None:
    """The environment variable that set ``name``, if one did (a secret's file first)."""
    candidates = [f"THREADBOT_{name.upper()}"]
    if _is_secret(field):
        candidates.insert(0, file_variable(name))
    alias = getattr(field, "validation_alias", None)
    if isinstance(alias, AliasChoices):
        candidates += [c for c in alias.choices if isinstance(c, str) and c.isupper()]
    return next((c for c in candidates if c in environ), None)


def _is_secret(field: Any) -> bool:
    annotation = getattr(field, "annotation", None)
    return annotation is not None and SecretStr in getattr(annotation, "__args__", (annotation,))


def _dotted(loc: Sequence[int | str]) -> str:
    """``("policy", "rules", 1, "tool")`` -> ``policy.rules[1].tool``."""
    text = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for a bad key of a table
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _layer_fields() -> Mapping[str, Any]:
    from bot.layer_tables import SlackWorkspace

    return SlackWorkspace.model_fields


def _suggest(name: object, fields: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(str(name), list(fields), n=1)
    return f" (did you mean {close[0]}?)" if close else " (see the README's Settings table)"
