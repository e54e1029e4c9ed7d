"""``run_command``: a shell command in the workspace, bounded in time and output.

The command runs as ``/bin/sh -c COMMAND`` in ``ctx.workspace``, in a new session
(its own process group), with stdin from ``/dev/null``, stderr merged into stdout
and a small environment (:data:`PASSED_ENV`; the bot's tokens are not passed).
With a :class:`core.tools.sandbox.Sandbox` (the default where bubblewrap works) it
runs confined by it, with a network only when ``ctx.network`` (a policy rule's
grant); without one, ``run_as`` (uid, gid) runs it as another user through
``setpriv`` (util-linux), for a bot running as root.

The process group (and the command's cgroup) never outlives the call
(:mod:`core.tools.spawn`):

- when the shell exits, processes it left in the background are killed;
- after the timeout the group gets SIGTERM, then SIGKILL after :data:`TERM_GRACE` s;
- when the task is cancelled (``/stop``) the group gets SIGKILL at once, and the
  cancelled task finishes only after the shell is reaped and no live process of
  the group is left (Linux: checked in ``/proc`` and the cgroup).

Output is read as it comes and only ``ctx.output_limit`` characters are kept: the
head and the tail, with a ``[... N characters cut ...]`` marker between them.

Memory and processes are capped per command, whatever it forks: with
``groups`` (:mod:`core.tools.cgroups`) each command runs in a cgroup of its own
(``ctx.command_memory_mb`` for all its processes together, ``ctx.command_processes``
at once), entered before it runs anything (:mod:`core.tools.shim`), killed whole
when the call ends, then removed. CPU time is capped per process with ``prlimit``
(util-linux): ``RLIMIT_CPU`` (``ctx.command_cpu_seconds``; the process gets
SIGXCPU). A cap that was hit is said in the tool result (the group's own counters
for memory and processes).

After every command (done, failed, timed out or stopped) no file in the workspace
keeps a setuid or setgid bit (:func:`core.tools.file_modes.strip_setid`).
"""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import signal
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from core.models.base import ToolKind, ToolSpec
from core.tools.base import ToolContext, ToolOutput
from core.tools.capture import Capture
from core.tools.cgroups import CommandGroups, Group
from core.tools.file_modes import strip_setid
from core.tools.inputs import ToolInput
from core.tools.processes import describe
from core.tools.sandbox import Launch, Sandbox, hand_over
from core.tools.shim import Hold, shimmed
from core.tools.spawn import kill_all, run_to_end, start, wait_exit
from core.vocabulary.errors import ToolError

TERM_GRACE = 2.0
"""Seconds between SIGTERM and SIGKILL when a command times out."""

PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM", "USER")
"""Environment variables the command inherits from the bot; all others are dropped."""

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
    ``"exit code N\\n<output>"``, an error result when N != 0 or the command hit a
    cap of its CPU time, memory or processes (said in the result). Raises
    :class:`ToolError` for bad input, a command that cannot start, or a timeout
    (the message holds the output captured so far).
    """

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        run_as: tuple[int, int] | None = None,
        groups: CommandGroups | None = None,
    ):
        self.sandbox = sandbox
        self.run_as = run_as
        self.groups = groups
        """Where each command gets its cgroup (None: no cgroup, no memory or process cap)."""

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
        """Run the command; see the module docstring for caps, timeout and cancellation."""
        given = RunCommandInput.parse(args)
        command = given.command
        if not command.strip():
            raise ToolError("`command` is empty")
        timeout = _timeout(given.timeout, ctx)
        capture = Capture(ctx.output_limit, ctx.redactor.stream())
        if self.sandbox is not None:
            await asyncio.to_thread(self.sandbox.prepare, ctx.workspace)
        elif self.run_as is not None:
            await asyncio.to_thread(hand_over, ctx.workspace, self.run_as)
        group = self._group(ctx)
        try:
            code = await self._run(command, timeout, capture, group, ctx)
        finally:
            hits = await run_to_end(_after(group, ctx))
        output = capture.finish()
        caps = [*_cpu_hit(code, output, ctx), *hits]
        capped = bool(caps)  # a resource cap hit: the command failed, whatever its exit
        if capture.cut:
            caps.append(f"output capped at {ctx.output_limit} characters")
        said = "".join(f"\n[{cap}]" for cap in caps)
        if code is None:
            raise ToolError(f"command timed out after {timeout:g} s\n{output}{said}")
        return ToolOutput(
            content=f"exit code {code}\n{output}{said}",
            # redacted before it is cut: a secret cut in two would not be found after
            note=f"ran `{_one_line(ctx.redactor.redact(command))}`: exit {code}"
            + "".join(f" ({c})" for c in caps),
            is_error=code != 0 or capped,
        )

    def _group(self, ctx: ToolContext) -> Group | None:
        """The command's own cgroup with the context's caps (None without ``groups``).

        Made in this thread, not another: it is a few writes to the cgroup file
        system, and a cancellation while a thread made it would lose the group.
        """
        if self.groups is None:
            return None
        try:
            return self.groups.create(
                memory_mb=ctx.command_memory_mb, processes=ctx.command_processes
            )
        except OSError as exc:
            raise ToolError(
                f"cannot cap the command's memory and processes: {exc.strerror or exc}"
            ) from exc

    async def _run(
        self, command: str, limit: float, capture: Capture, group: Group | None, ctx: ToolContext
    ) -> int | None:
        """Start the command through the shim, record it, let it go, wait ``limit`` seconds;
        the exit code (None: timed out). Nothing of it runs on once this returns or raises.
        """
        launch = self._launch(_capped(command, ctx), ctx)
        hold = Hold()
        launch = shimmed(launch, group, hold, bound=self.sandbox is not None)
        try:
            transport, protocol = await start(launch, ctx.workspace, capture, group)
        except BaseException:
            hold.close()
            if launch.network is not None:
                await run_to_end(launch.network.close())
            raise
        try:
            cgroup = group.name if group is not None else None
            if ctx.started is not None and (process := describe(transport.get_pid(), cgroup)):
                await ctx.started(process)  # recorded before the command runs anything
            hold.release()
            if launch.network is not None:
                try:
                    await launch.network.attach()
                except OSError as exc:
                    raise ToolError(f"cannot give the command its network: {exc}") from exc
            return await wait_exit(transport, protocol, limit, TERM_GRACE)
        finally:
            hold.close()
            await run_to_end(kill_all(transport, protocol, group))
            if launch.network is not None:
                await run_to_end(launch.network.close())

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


def _capped(command: str, ctx: ToolContext) -> list[str]:
    """The argv that runs ``command`` under the context's CPU time cap (per process).

    Raises :class:`ToolError` when the cap is set and ``prlimit`` is not installed.
    """
    argv = ["/bin/sh", "-c", command]
    if ctx.command_cpu_seconds is None:
        return argv
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise ToolError("cannot cap the command's CPU time: prlimit is not installed")
    soft = max(1, math.ceil(ctx.command_cpu_seconds))
    return [prlimit, f"--cpu={soft}:{soft + 1}", "--", *argv]  # SIGXCPU at soft, KILL at hard


def _cpu_hit(code: int | None, output: str, ctx: ToolContext) -> list[str]:
    """The CPU time cap, as said in the result, when the command hit it."""
    if ctx.command_cpu_seconds is not None and (
        code in _SIGXCPU_CODES or "CPU time limit exceeded" in output  # a child's, told by sh
    ):
        return [f"stopped at its CPU time cap of {ctx.command_cpu_seconds:g} s"]
    return []


async def _after(group: Group | None, ctx: ToolContext) -> list[str]:
    """Once the command's processes are gone: the caps its group hit, the group removed,
    and no setuid or setgid bit left in the workspace."""
    hits: list[str] = []
    if group is not None:
        hits = await asyncio.to_thread(_retire, group, ctx)
    await asyncio.to_thread(strip_setid, ctx.workspace)
    return hits


def _retire(group: Group, ctx: ToolContext) -> list[str]:
    """The caps ``group`` hit (its counters), then the group removed (blocking)."""
    hits = group.hits(memory_mb=ctx.command_memory_mb, processes=ctx.command_processes)
    group.remove()
    return hits


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
