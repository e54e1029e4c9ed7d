"""Reading fields of a raw platform payload without trusting its shape.

A Slack body or a Discord dispatch is JSON from the network: any field may be
missing, null, or of another type than the platform documents
(https://docs.slack.dev/apis/events-api/#callback-field,
https://discord.com/developers/docs/events/gateway-events#receive-events). The
platforms' ``types`` modules (:mod:`adapters.slack.types`,
:mod:`adapters.discord.types`) say what each payload should hold; the readers here
make sure of it. Each takes a field's value as the payload's ``TypedDict`` types it
(``text(d.get("content"))``) and returns it when it has that type at run time, and
a neutral value (None, ``{}``, ``[]``) otherwise, so translators built on them
never raise.

Translators read payloads with ``.get`` only, never ``payload["key"]``: a missing
object is read as an empty mapping (:func:`mapping`), which has none of its
documented keys. Pure functions; none raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

M = TypeVar("M", bound=Mapping[str, Any])
T = TypeVar("T")


def text(value: object) -> str | None:
    """``value`` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def integer(value: object) -> int | None:
    """``value`` if it is an integer (not a bool: JSON ``true`` is not 1), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def mapping(value: M | None) -> M:
    """``value`` if it is a mapping (a JSON object), else an empty one.

    The empty mapping stands for a missing object: it has none of the keys its
    ``TypedDict`` documents, so it is read with ``.get`` like every payload.
    """
    return value if isinstance(value, Mapping) else cast(M, {})


def items(value: list[T] | None) -> list[T]:
    """``value`` if it is a list (a JSON array), else an empty one; items unchecked."""
    return value if isinstance(value, list) else []


def mappings(value: list[M] | None) -> list[M]:
    """The mappings (JSON objects) in the list ``value``; ``[]`` when it is not a list."""
    return [item for item in items(value) if isinstance(item, Mapping)]
