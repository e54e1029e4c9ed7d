"""A command's processes: spawned in a session of their own, waited for, killed whole.

The shell runs in a new session (its own process group), with stdin from the launch
(``/dev/null`` by default) and stderr merged into stdout, fed to a
:class:`core.tools.capture.Capture`. Killing means SIGKILL to the process group and
to every process of the command's cgroup, again and again until both are empty (a
process may fork meanwhile), for at most :data:`GONE_LIMIT` seconds (Linux: checked
in ``/proc`` and the cgroup). Cleanups run to their end even when the task awaiting
them is cancelled (:func:`run_to_end`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

from core.tools.capture import Capture
from core.tools.cgroups import Group
from core.tools.processes import group_alive, signal_group
from core.tools.sandbox import Launch
from core.vocabulary.errors import ToolError

T = TypeVar("T")

GONE_LIMIT = 5.0
"""Seconds to wait for a killed command to be gone."""
_DRAIN_LIMIT = 1.0  # seconds to wait for the output pipe to close once the group is gone
_POLL = 0.01


class CommandProtocol(asyncio.SubprocessProtocol):
    """Feeds the output to a :class:`Capture`; ``exited`` resolves once the shell is reaped."""

    def __init__(self, capture: Capture) -> None:
        loop = asyncio.get_running_loop()
        self.capture = capture
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.capture.feed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.output_closed.done():
            self.output_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


Started = tuple[asyncio.SubprocessTransport, "CommandProtocol"]
"""A spawned command: its transport and its protocol."""


async def start(launch: Launch, cwd: Path, capture: Capture, group: Group | None) -> Started:
    """Spawn the command; a cancellation meanwhile kills its group before it goes on.

    The shell runs before the spawn returns; cancelling asyncio's spawn would kill
    the shell alone and leave whatever it started running.
    """
    spawn = asyncio.ensure_future(_spawn(launch, cwd, capture))
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        await run_to_end(_kill_spawned(spawn, group))
        raise


async def _kill_spawned(spawn: asyncio.Future[Started], group: Group | None) -> None:
    """Kill the group of a spawn that finishes; nothing to do when it failed to start."""
    with contextlib.suppress(ToolError):
        await kill_all(*await spawn, group)


async def _spawn(launch: Launch, cwd: Path, capture: Capture) -> Started:
    """Start the launch's argv (``/bin/sh -c command``, maybe under ``prlimit``, maybe in
    the sandbox) in its own session; raises ToolError when it cannot."""
    try:
        return await asyncio.get_running_loop().subprocess_exec(
            lambda: CommandProtocol(capture),
            *launch.argv,
            stdin=subprocess.DEVNULL if launch.stdin is None else launch.stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=launch.env,
            start_new_session=True,
            pass_fds=launch.pass_fds,
        )
    except OSError as exc:
        raise ToolError(f"cannot start the command: {exc}") from exc
    finally:
        launch.spawned()


async def wait_exit(
    transport: asyncio.SubprocessTransport, protocol: CommandProtocol, limit: float, grace: float
) -> int | None:
    """The shell's exit code, or None when it ran past ``limit`` seconds.

    On timeout the group gets SIGTERM and up to ``grace`` seconds to exit.
    """
    try:
        await asyncio.wait_for(asyncio.shield(protocol.exited), limit)
    except TimeoutError:
        signal_group(transport.get_pid(), signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.exited), grace)
        return None
    code = transport.get_returncode()
    assert code is not None, "the shell exited without an exit code"
    return code


async def kill_all(
    transport: asyncio.SubprocessTransport, protocol: CommandProtocol, group: Group | None
) -> None:
    """SIGKILL the command's process group and cgroup, wait until both are empty and the
    shell is reaped, close the pipes."""
    loop = asyncio.get_running_loop()
    pgid = transport.get_pid()
    deadline = loop.time() + GONE_LIMIT
    await asyncio.to_thread(_kill_once, pgid, group)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(protocol.exited), GONE_LIMIT)
    while (  # noqa: ASYNC110 (again and again: a process may have forked meanwhile)
        await asyncio.to_thread(_kill_once, pgid, group) and loop.time() < deadline
    ):
        await asyncio.sleep(_POLL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(protocol.output_closed), _DRAIN_LIMIT)
    transport.close()


def _kill_once(pgid: int, group: Group | None) -> bool:
    """SIGKILL what is left of process group ``pgid`` and of ``group``; True while a
    process of either was left (blocking: reads /proc and the cgroup)."""
    signal_group(pgid, signal.SIGKILL)
    left = group_alive(pgid)
    if group is not None:
        group.kill()
        left = left or bool(group.members())
    return left


async def run_to_end(cleanup: Awaitable[T]) -> T:
    """Await ``cleanup`` to its end even if this task is cancelled meanwhile; its result.

    A cancellation that arrives during the cleanup is re-raised after it.
    """
    task = asyncio.ensure_future(cleanup)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the cancellation wins over a cleanup failure
        raise cancelled
    return task.result()
