"""Secret settings read from files: ``THREADBOT_<SETTING>_FILE=/run/secrets/...``.

A token need not sit in the bot's environment (where a process of the same user
could read it in ``/proc/<pid>/environ``): each secret setting (a ``SecretStr``
field: ``anthropic_api_key``, ``slack_bot_token``, ``slack_app_token``,
``slack_signing_secret``, ``discord_token``) may be read from the file that
``THREADBOT_<SETTING>_FILE`` names, as Docker and Kubernetes secrets are mounted
(https://docs.docker.com/engine/swarm/secrets/). The file's content, stripped of
surrounding whitespace, is the value.

A file that cannot be read, is not UTF-8 text or is empty, and a setting given both
directly (``SLACK_BOT_TOKEN``) and by file, are settings errors: :class:`SecretFiles`
hands a :class:`FileProblem` to the settings, whose validator raises it as a
``ValueError``, so it is told as any other bad setting (:mod:`bot.settings_errors`),
without the value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from pydantic import AliasChoices, SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource


def file_variable(name: str) -> str:
    """The variable naming the file of the secret setting ``name``:
    ``slack_bot_token`` -> ``THREADBOT_SLACK_BOT_TOKEN_FILE``."""
    return f"THREADBOT_{name.upper()}_FILE"


def secret_settings(fields: Mapping[str, FieldInfo]) -> list[str]:
    """The names of the secret settings among ``fields`` (those typed ``SecretStr``)."""
    return [
        name
        for name, field in fields.items()
        if field.annotation is SecretStr or SecretStr in get_args(field.annotation)
    ]


@dataclass(frozen=True)
class FileProblem:
    """Why the secret setting's file gives no value; never holds the value."""

    reason: str


class SecretFiles(PydanticBaseSettingsSource):
    """The settings source of the secret files, above the environment variables."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` reads every file at once."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        """``{setting: value or FileProblem}`` for each ``THREADBOT_*_FILE`` set.

        A setting given as an init argument (a higher source) is left to it. The key
        is the one the environment source uses (``SLACK_BOT_TOKEN``), so that this
        value, not the variable's, is the one validated when both are set.
        """
        environ = {key.upper(): value for key, value in os.environ.items()}
        found: dict[str, Any] = {}
        fields = self.settings_cls.model_fields
        for name in secret_settings(fields):
            variable = file_variable(name)
            path = environ.get(variable)
            keys = _keys(name, fields[name])
            if path is None or any(k in self.current_state for k in keys):
                continue
            direct = [v for v in dict.fromkeys(k.upper() for k in keys) if v in environ]
            if direct:
                found[keys[0]] = FileProblem(f"set either {direct[0]} or {variable}, not both")
            else:
                found[keys[0]] = read_secret(path)
        return found


def read_secret(path: str) -> str | FileProblem:
    """The content of the file at ``path``, stripped; a :class:`FileProblem` when it
    cannot be read, is not UTF-8 text or holds nothing but whitespace."""
    if not path.strip():
        return FileProblem("names no file")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:  # its message quotes bytes of the file
        return FileProblem(f"{path} is not UTF-8 text")
    except OSError as exc:
        return FileProblem(f"cannot read {path}: {exc.strerror or type(exc).__name__}")
    text = text.strip()
    return text if text else FileProblem(f"{path} is empty")


def _keys(name: str, field: FieldInfo) -> list[str]:
    """The keys that give ``name`` a value, the one a source hands its value under
    first: its validation aliases (``SLACK_BOT_TOKEN``, read without the prefix), else
    the field's name (a source's key for a field without an alias) and the variable
    ``THREADBOT_<NAME>`` that sets it directly."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [c for c in alias.choices if isinstance(c, str)]
    if isinstance(alias, str):
        return [alias]
    return [name, f"THREADBOT_{name.upper()}"]
