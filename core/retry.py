"""Retry policies of tool calls: how often a call safe to repeat is tried, and how long
to wait between two attempts.

Three policies, one tagged union (:data:`RetryPolicy`, by ``kind``), each with its
attempt limit (``attempts``: tries in all, the first one included) and its fallback
when every attempt failed (:class:`Fallback`); :func:`retry_policy` builds one by
name (the bot's ``tool_retry`` setting):

- :class:`NoRetry` (``none``, the default): one attempt, as a call always had;
- :class:`Fixed` (``fixed``): the same delay before each new attempt;
- :class:`Exponential` (``exponential``): ``base_seconds`` doubled after each attempt,
  at most ``cap_seconds``, less up to ``jitter`` of it.

The jitter is no random draw: it is read from a hash of the call's ``tool_use_id``
and the attempt's number (:func:`jitter_share`), so a run that is killed and
restarts waits the same delays as one that was not (docs/architecture.md,
"Durability and exactly-once"), and the one reader of randomness stays
:mod:`core.context`. The engine applies a policy to the tool calls that may be
repeated (:mod:`core.run.tool_step`); the model client keeps its own retries.

Times are in seconds. Pure: imports nothing of ``core``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_ATTEMPTS = 10
"""The most attempts a policy may make (the ``tool_retry_attempts`` setting's bound)."""
FIXED_DELAY = 1.0
"""Seconds :func:`retry_policy` waits between two attempts of a ``fixed`` policy."""
EXPONENTIAL_BASE = 1.0
"""Seconds before the second attempt of an ``exponential`` policy, before its jitter."""
EXPONENTIAL_CAP = 30.0
"""The longest delay of an ``exponential`` policy, in seconds."""
EXPONENTIAL_JITTER = 0.5
"""The share of an ``exponential`` delay its jitter may take off."""
ERROR_CHARS = 200
"""Characters of each earlier attempt's error the call's result repeats (its first line)."""


class Fallback(StrEnum):
    """What a call's one result is once every attempt failed.

    ``last_error``: the last attempt's error, with a line naming how many attempts
    were made and each earlier attempt's error (:func:`attempts_line`).
    """

    LAST_ERROR = "last_error"


class _Policy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(default=1, ge=1, le=MAX_ATTEMPTS)
    """Attempts in all, the first one included."""
    fallback: Fallback = Fallback.LAST_ERROR
    # Each policy's ``delay(attempt, key)``: seconds to wait after the failed attempt
    # ``attempt`` (from 1) of the call ``key`` (its ``tool_use_id``) before the next one.


class NoRetry(_Policy):
    """One attempt: a failed call's error is its result at once."""

    kind: Literal["none"] = "none"
    attempts: Literal[1] = 1

    def delay(self, attempt: int, key: str) -> float:
        """No delay: there is no next attempt."""
        return 0.0


class Fixed(_Policy):
    """``attempts`` attempts, ``delay_seconds`` apart."""

    kind: Literal["fixed"] = "fixed"
    attempts: int = Field(default=3, ge=1, le=MAX_ATTEMPTS)
    delay_seconds: float = Field(default=FIXED_DELAY, ge=0, allow_inf_nan=False)

    def delay(self, attempt: int, key: str) -> float:
        """``delay_seconds``, whatever the attempt."""
        return self.delay_seconds


class Exponential(_Policy):
    """``attempts`` attempts; after attempt ``n`` it waits ``base_seconds * 2**(n-1)``,
    at most ``cap_seconds``, less a share of it up to ``jitter`` (0 to 1), the same
    share for the same call and attempt every time (:func:`jitter_share`)."""

    kind: Literal["exponential"] = "exponential"
    attempts: int = Field(default=3, ge=1, le=MAX_ATTEMPTS)
    base_seconds: float = Field(default=EXPONENTIAL_BASE, ge=0, allow_inf_nan=False)
    cap_seconds: float = Field(default=EXPONENTIAL_CAP, ge=0, allow_inf_nan=False)
    jitter: float = Field(default=EXPONENTIAL_JITTER, ge=0, le=1, allow_inf_nan=False)

    def delay(self, attempt: int, key: str) -> float:
        """The capped exponential delay after ``attempt``, less its jitter."""
        full = min(self.cap_seconds, self.base_seconds * 2.0 ** max(attempt - 1, 0))
        return full * (1 - self.jitter * jitter_share(key, attempt))


RetryPolicy = Annotated[NoRetry | Fixed | Exponential, Field(discriminator="kind")]
"""A tool call's retry policy, tagged by ``kind`` (``none``, ``fixed``, ``exponential``)."""

POLICY_NAMES = ("none", "fixed", "exponential")
"""The names :func:`retry_policy` takes (the ``tool_retry`` setting's values)."""


def retry_policy(name: str, *, attempts: int = 3) -> NoRetry | Fixed | Exponential:
    """The policy called ``name`` (:data:`POLICY_NAMES`) with ``attempts`` attempts
    (``none`` makes one whatever ``attempts`` says) and this module's delays.

    Raises ``ValueError`` for another name, or ``attempts`` outside 1 to
    :data:`MAX_ATTEMPTS` (pydantic's ``ValidationError``, a ``ValueError``).
    """
    match name:
        case "none":
            return NoRetry()
        case "fixed":
            return Fixed(attempts=attempts)
        case "exponential":
            return Exponential(attempts=attempts)
    raise ValueError(f"unknown retry policy {name!r}; use one of {', '.join(POLICY_NAMES)}")


def jitter_share(key: str, attempt: int) -> float:
    """A share in [0, 1) read from the SHA-256 of ``key`` and ``attempt``: the same for
    the same call and attempt in any process, spread evenly across calls."""
    digest = hashlib.sha256(f"{key}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def error_said(error: str) -> str:
    """An attempt's error as the call's result repeats it: its first line, at most
    :data:`ERROR_CHARS` characters (``no reason given`` when empty)."""
    lines = error.strip().splitlines()
    first = lines[0].strip() if lines else ""
    if len(first) > ERROR_CHARS:
        first = first[: ERROR_CHARS - 1] + "…"
    return first or "no reason given"


def attempts_line(errors: Sequence[str], *, gave_up: bool) -> str:
    """The line a call's one result ends with when it took more than one attempt:
    ``[after 3 attempts: <error 1>; <error 2>]``, or ``[gave up after 3 attempts: ...]``
    when the last one failed too. ``errors``: the earlier attempts' errors, in order
    (the last attempt's output is the result itself); empty for a call that made one
    attempt, which gets no line (``""``)."""
    if not errors:
        return ""
    made = len(errors) + 1
    said = "; ".join(error_said(e) for e in errors)
    return f"[{'gave up after' if gave_up else 'after'} {made} attempts: {said}]"
