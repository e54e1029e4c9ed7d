"""``run_command``: a shell command in the workspace, bounded in time and output.

The command runs as ``/bin/sh -c COMMAND`` in ``ctx.workspace``, in a new session
(its own process group), with stdin from ``/dev/null``, stderr merged into stdout
and a small environment (:data:`PASSED_ENV`; the bot's tokens are not passed).
With a :class:`core.tools.sandbox.Sandbox` (the default where bubblewrap works) it
runs confined by it, with a network only when ``ctx.network`` (a policy rule's
grant); without one, ``run_as`` (uid, gid) runs it as another user through
``setpriv`` (util-linux), for a bot running as root.

The process group never outlives the call:

- when the shell exits, processes it left in the background are killed;
- after the timeout the group gets SIGTERM, then SIGKILL after :data:`TERM_GRACE` s;
- when the task is cancelled (``/stop``) the group gets SIGKILL at once, and the
  cancelled task finishes only after the shell is reaped and no live process of
  the group is left (Linux: checked in ``/proc``).

Output is read as it comes and only ``ctx.output_limit`` characters are kept: the
head and the tail, with a ``[... N characters cut ...]`` marker between them.

CPU time and memory are capped per process with ``prlimit`` (util-linux):
``RLIMIT_CPU`` (``ctx.command_cpu_seconds``; the process gets SIGXCPU) and
``RLIMIT_DATA`` (``ctx.command_memory_mb``; allocations past it fail), not
``RLIMIT_AS``, which breaks runtimes that reserve address space (Node, the JVM, Go).
A cap that was hit is said in the tool result.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import math
import os
import shutil
import signal
import subprocess
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from core.models.base import ToolKind, ToolSpec
from core.secrets import RedactionStream
from core.tools.base import ToolContext, ToolOutput
from core.tools.inputs import ToolInput
from core.tools.processes import describe, group_alive, signal_group
from core.tools.sandbox import Launch, Sandbox, hand_over
from core.vocabulary.errors import ToolError

TERM_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when a command times out."""

PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM", "USER")
"""Environment variables the command inherits from the bot; all others are dropped."""

_GONE_LIMIT = 5.0  # seconds to wait for a killed group to disappear
_DRAIN_LIMIT = 1.0  # seconds to wait for the output pipe to close once the group is gone
_POLL = 0.01
_NOTE_WIDTH = 60


class RunCommandInput(ToolInput):
    """``run_command``: the command line, and the seconds it may take."""

    command: str = Field(description="Shell command line.")
    timeout: float | None = Field(
        None,
        description="Seconds.",
        json_schema_extra={"exclusiveMinimum": 0},  # refused in words by _timeout
    )


class RunCommand:
    """``run_command``: run ``{"command": str, "timeout"?: seconds}`` with ``/bin/sh -c``.

    ``timeout`` defaults to, and is capped at, ``ctx.command_timeout``. Returns
    ``"exit code N\\n<output>"``, an error result when N != 0. Raises
    :class:`ToolError` for bad input, a command that cannot start, or a timeout
    (the message holds the output captured so far).
    """

    def __init__(self, sandbox: Sandbox | None = None, run_as: tuple[int, int] | None = None):
        self.sandbox = sandbox
        self.run_as = run_as

    spec = ToolSpec(
        name="run_command",
        description=(
            "Run a shell command (/bin/sh -c) in the workspace directory and return its "
            "exit code and combined stdout/stderr (long output keeps head and tail). "
            "stdin is empty; background processes are killed when the command ends. "
            "Give `timeout` in seconds for long commands (capped by the bot)."
        ),
        input_schema=RunCommandInput.json_schema(),
        kind=ToolKind.MUTATING,
    )

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        """Run the command; see the module docstring for timeout and cancellation."""
        given = RunCommandInput.parse(args)
        command = given.command
        if not command.strip():
            raise ToolError("`command` is empty")
        timeout = _timeout(given.timeout, ctx)
        capture = _Capture(ctx.output_limit, ctx.redactor.stream())
        if self.sandbox is not None:
            await asyncio.to_thread(self.sandbox.prepare, ctx.workspace)
        elif self.run_as is not None:
            await asyncio.to_thread(hand_over, ctx.workspace, self.run_as)
        launch = self._launch(_capped(command, ctx), ctx)
        try:
            transport, protocol = await _start(launch, ctx.workspace, capture)
        except BaseException:
            if launch.network is not None:
                await _run_to_end(launch.network.close())
            raise
        try:
            if launch.network is not None:
                try:
                    await launch.network.attach()
                except OSError as exc:
                    raise ToolError(f"cannot give the command its network: {exc}") from exc
            if ctx.started is not None and (process := describe(transport.get_pid())):
                await ctx.started(process)
            code = await _wait_exit(transport, protocol, timeout)
        finally:
            await _run_to_end(_kill_group(transport, protocol))
            if launch.network is not None:
                await _run_to_end(launch.network.close())
        output = capture.finish()
        if code is None:
            raise ToolError(f"command timed out after {timeout:g} s\n{output}")
        caps = _caps_hit(code, output, capture, ctx)
        said = "".join(f"\n[{cap}]" for cap in caps)
        return ToolOutput(
            content=f"exit code {code}\n{output}{said}",
            note=f"ran `{_one_line(command)}`: exit {code}" + "".join(f" ({c})" for c in caps),
            is_error=code != 0,
        )

    def _launch(self, argv: list[str], ctx: ToolContext) -> Launch:
        """How to start ``argv``: in the sandbox, as ``run_as``, or as the bot's user."""
        if self.sandbox is not None:
            try:
                return self.sandbox.launch(argv, ctx.workspace, network=ctx.network)
            except OSError as exc:
                raise ToolError(str(exc)) from exc
        env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
        env.setdefault("PATH", os.defpath)
        if self.run_as is not None:
            uid, gid = self.run_as
            prefix = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
            argv = [*prefix, *argv]
        return Launch(argv=argv, env=env)


_SIGXCPU_CODES = (-signal.SIGXCPU, 128 + signal.SIGXCPU)
"""How a process killed by SIGXCPU shows: as the shell itself, or as its child."""
_NO_MEMORY = ("MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc")
"""What programs commonly print when an allocation fails."""


def _capped(command: str, ctx: ToolContext) -> list[str]:
    """The argv that runs ``command`` under the context's CPU and memory caps.

    Raises :class:`ToolError` when caps are set and ``prlimit`` is not installed.
    """
    argv = ["/bin/sh", "-c", command]
    limits = []
    if ctx.command_cpu_seconds is not None:
        soft = max(1, math.ceil(ctx.command_cpu_seconds))
        limits.append(f"--cpu={soft}:{soft + 1}")  # SIGXCPU at soft, SIGKILL at hard
    if ctx.command_memory_mb is not None:
        limits.append(f"--data={ctx.command_memory_mb * 1024 * 1024}")
    if not limits:
        return argv
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise ToolError("cannot cap the command's CPU time and memory: prlimit is not installed")
    return [prlimit, *limits, "--", *argv]


def _caps_hit(code: int, output: str, capture: _Capture, ctx: ToolContext) -> list[str]:
    """The caps the command hit, as said in its result."""
    hit = []
    if ctx.command_cpu_seconds is not None and (
        code in _SIGXCPU_CODES or "CPU time limit exceeded" in output  # a child's, told by sh
    ):
        hit.append(f"stopped at its CPU time cap of {ctx.command_cpu_seconds:g} s")
    if ctx.command_memory_mb is not None and code != 0 and any(s in output for s in _NO_MEMORY):
        hit.append(f"an allocation failed at its memory cap of {ctx.command_memory_mb} MB")
    if capture.cut:
        hit.append(f"output capped at {ctx.output_limit} characters")
    return hit


def _timeout(asked: float | None, ctx: ToolContext) -> float:
    """Seconds the command may run: ``asked`` capped at ``ctx.command_timeout``."""
    if asked is None:
        return ctx.command_timeout
    if not (math.isfinite(asked) and asked > 0):
        raise ToolError("`timeout` must be a positive number of seconds")
    return min(asked, ctx.command_timeout)


def _one_line(command: str) -> str:
    """``command`` on one line, at most :data:`_NOTE_WIDTH` characters, without backticks."""
    text = " ".join(command.split()).replace("`", "'")
    return text if len(text) <= _NOTE_WIDTH else text[: _NOTE_WIDTH - 1] + "…"


class _Capture:
    """Decoded output (UTF-8, bad bytes replaced) kept to ``limit`` characters: head + tail.

    Secrets are redacted as the output streams in (``redaction``), before the cut, so
    a token split across two reads, or by the cut, never survives in part.
    """

    def __init__(self, limit: int, redaction: RedactionStream | None = None) -> None:
        self._redaction = redaction
        self._head_room = max(0, limit) // 2
        self._tail_room = max(0, limit) - self._head_room
        self._head = ""
        self._tail = ""
        self._total = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes, *, final: bool = False) -> None:
        """Take the next bytes of output; memory stays within ``limit`` characters."""
        text = self._decoder.decode(data, final)
        if self._redaction is not None:
            text = self._redaction.feed(text)
            if final:
                text += self._redaction.finish()
        self._total += len(text)
        room = self._head_room - len(self._head)
        if room > 0:
            self._head += text[:room]
            text = text[room:]
        if text and self._tail_room:
            self._tail = (self._tail + text)[-self._tail_room :]

    @property
    def cut(self) -> int:
        """Characters left out so far (between the head and the tail)."""
        return self._total - len(self._head) - len(self._tail)

    def finish(self) -> str:
        """The kept output, with a marker where characters were cut. Call once, at the end."""
        self.feed(b"", final=True)
        cut = self.cut
        if cut:
            return f"{self._head}\n[... {cut} characters cut ...]\n{self._tail}"
        return self._head + self._tail


class _CommandProtocol(asyncio.SubprocessProtocol):
    """Feeds the output to a :class:`_Capture`; ``exited`` resolves once the shell is reaped."""

    def __init__(self, capture: _Capture) -> None:
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


_Started = tuple[asyncio.SubprocessTransport, "_CommandProtocol"]


async def _start(launch: Launch, cwd: Path, capture: _Capture) -> _Started:
    """Spawn the command; a cancellation meanwhile kills its group before it goes on.

    The shell runs before the spawn returns; cancelling asyncio's spawn would kill
    the shell alone and leave whatever it started running.
    """
    spawn = asyncio.ensure_future(_spawn(launch, cwd, capture))
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        await _run_to_end(_kill_spawned(spawn))
        raise


async def _kill_spawned(spawn: asyncio.Future[_Started]) -> None:
    """Kill the group of a spawn that finishes; nothing to do when it failed to start."""
    with contextlib.suppress(ToolError):
        await _kill_group(*await spawn)


async def _spawn(launch: Launch, cwd: Path, capture: _Capture) -> _Started:
    """Start the launch's argv (``/bin/sh -c command``, maybe under ``prlimit``, maybe in
    the sandbox) in its own session; raises ToolError when it cannot."""
    try:
        return await asyncio.get_running_loop().subprocess_exec(
            lambda: _CommandProtocol(capture),
            *launch.argv,
            stdin=subprocess.DEVNULL,
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


async def _wait_exit(
    transport: asyncio.SubprocessTransport, protocol: _CommandProtocol, limit: float
) -> int | None:
    """The shell's exit code, or None when it ran past ``limit`` seconds.

    On timeout the group gets SIGTERM and up to :data:`TERM_GRACE` seconds to exit.
    """
    try:
        await asyncio.wait_for(asyncio.shield(protocol.exited), limit)
    except TimeoutError:
        signal_group(transport.get_pid(), signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.exited), TERM_GRACE)
        return None
    code = transport.get_returncode()
    assert code is not None, "the shell exited without an exit code"
    return code


async def _kill_group(transport: asyncio.SubprocessTransport, protocol: _CommandProtocol) -> None:
    """SIGKILL the command's group, wait until it is gone and the shell reaped, close the pipes."""
    loop = asyncio.get_running_loop()
    pgid = transport.get_pid()
    deadline = loop.time() + _GONE_LIMIT
    signal_group(pgid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(protocol.exited), _GONE_LIMIT)
    while await asyncio.to_thread(group_alive, pgid) and loop.time() < deadline:
        signal_group(pgid, signal.SIGKILL)  # again: a process may have forked meanwhile
        await asyncio.sleep(_POLL)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(protocol.output_closed), _DRAIN_LIMIT)
    transport.close()


async def _run_to_end(cleanup: Coroutine[Any, Any, None]) -> None:
    """Await ``cleanup`` to its end even if this task is cancelled meanwhile.

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
    task.result()
