"""Failures raised by ``bot``.

The tree::

    BotError
    ├── GaveUp        a supervised background task kept failing; the process ends
    ├── StartFailed   a platform adapter could not start (a refused token, ...)
    ├── OpsUnavailable  the operations address cannot be listened on
    ├── TracesUnavailable  the trace export asked for cannot be given
    └── RayUnreachable  the Ray cluster runs should go to does not answer
"""

from __future__ import annotations

import os

from adapters.said import connection_said


class BotError(Exception):
    """Base of every failure raised by ``bot``."""


class GaveUp(BotError):
    """A supervised task failed more than its restart limit allows within the window.

    ``name`` is the task's name, ``restarts`` how many restarts it had within
    ``window`` seconds; the last failure is the ``__cause__``.
    """

    def __init__(self, name: str, *, restarts: int, window: float, error: BaseException) -> None:
        super().__init__(
            f"the {name} task failed {restarts + 1} times within {window:g} s; "
            f"giving up. Last error: {error!r}"
        )
        self.name = name
        self.restarts = restarts
        self.window = window


class StartFailed(BotError):
    """A platform adapter could not start; the message names the platform and why, in
    words (:func:`adapters.said.connection_said`: an address, not an exception's repr)."""

    def __init__(self, platform: str, reason: BaseException) -> None:
        super().__init__(f"could not start {platform}: {connection_said(reason)}")
        self.platform = platform


class OpsUnavailable(BotError):
    """The operations address (``ops_host:ops_port``) cannot be listened on: in use, or
    not an address of this host. The message names it, says why and what to set."""

    def __init__(self, address: str, error: OSError) -> None:
        why = os.strerror(error.errno).lower() if error.errno else str(error)
        super().__init__(
            f"cannot listen on the operations address {address}: {why} (set "
            "THREADBOT_OPS_HOST or THREADBOT_OPS_PORT; a port of 0 takes any free one)"
        )


class TracesUnavailable(BotError):
    """The environment asks for the OTLP export of traces, but it cannot be given: the
    OpenTelemetry SDK or exporter is not installed, or another protocol is asked for
    (:mod:`bot.tracing`). The message says what to do."""


class RayUnreachable(BotError):
    """The Ray cluster at ``ray_address`` does not answer (``runner = "ray"``); the
    message names the address, says why in words and what to set."""

    def __init__(self, address: str, why: str) -> None:
        super().__init__(
            f"the Ray cluster at {address} does not answer: {why} (start it, or set "
            "THREADBOT_RAY_ADDRESS to its head's host:port)"
        )
