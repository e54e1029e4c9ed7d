"""A granted network for one sandboxed command: slirp4netns on bwrap's namespace.

bwrap reports the namespace's process on its ``--info-fd`` and waits on its
``--block-fd`` until slirp4netns has configured a user-mode network there
(``--disable-host-loopback``: the host's 127.0.0.1, ``::1`` and its Unix sockets
stay out of reach; https://github.com/rootless-containers/slirp4netns). See
:mod:`core.tools.sandbox`.

Both configure the loopback device, so they must take turns. bwrap's child adds
127.0.0.1 to ``lo`` with ``NLM_F_EXCL`` and then sets it up (``loopback_setup`` in
bubblewrap's ``network.c``) right after it reports its pid; slirp4netns's
``--configure`` sets ``lo`` up too, and the kernel gives a loopback device that
comes up without an address 127.0.0.1 by itself. Started first, slirp4netns made
bwrap's own add fail (``bwrap: loopback: Failed RTM_NEWADDR``) and bwrap exit,
which a loaded machine showed now and then. So :meth:`Network.attach` starts
slirp4netns only once 127.0.0.1 is in the namespace's routes (its ``/32 host
LOCAL`` entry appears in ``/proc/<pid>/net/fib_trie`` when the address is added,
before the device is up: fib_frontend.c ``fib_add_ifaddr``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from dataclasses import dataclass, field

NETWORK_READY = 10.0
"""Seconds slirp4netns may take to configure a granted network."""


@dataclass
class Network:
    """The pipes bwrap reports on and waits for, and the slirp4netns serving it."""

    info_read: int
    block_write: int
    helper: str
    process: asyncio.subprocess.Process | None = None
    exit_write: int | None = None
    owned: list[int] = field(default_factory=list)
    join_userns: bool = False
    """bwrap made the network namespace inside its user namespace (it did not run as
    root): slirp4netns must join that user namespace too."""

    def close_child_ends(self) -> None:
        """Close this process's copies of the pipe ends bwrap took (after the spawn)."""
        for fd in self.owned:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.owned.clear()

    async def attach(self) -> None:
        """Read bwrap's child pid, start slirp4netns on its namespace, then let bwrap go.

        Raises :class:`OSError` when bwrap reports nothing or slirp4netns does not
        come up (the caller kills the command).
        """
        info = await asyncio.to_thread(_read_json, self.info_read)
        pid = int(str(info["child-pid"]))
        await _loopback_made(pid)
        if not await self._start_helper(pid):
            raise OSError("slirp4netns did not configure the network")
        os.write(self.block_write, b"1")

    async def _start_helper(self, pid: int) -> bool:
        """Start slirp4netns on ``pid``'s namespaces; True once it says it is ready."""
        ready_read, ready_write = os.pipe()
        exit_read, exit_write = os.pipe()
        self.exit_write = exit_write
        userns = [f"--userns-path=/proc/{pid}/ns/user"] if self.join_userns else []
        try:
            self.process = await asyncio.create_subprocess_exec(
                self.helper,
                *userns,
                "--configure",
                "--mtu=65520",
                "--disable-host-loopback",
                f"--ready-fd={ready_write}",
                f"--exit-fd={exit_read}",
                # The namespace by its path: bwrap running as root makes the network
                # namespace outside the sandbox's user namespace, so slirp4netns must
                # join the network namespace alone, not the user namespace with it.
                "--netns-type=path",
                f"/proc/{pid}/ns/net",
                "tap0",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(ready_write, exit_read),
                env={"PATH": os.defpath},
            )
        finally:
            os.close(ready_write)
            os.close(exit_read)
        try:
            ready = await asyncio.wait_for(asyncio.to_thread(os.read, ready_read, 1), NETWORK_READY)
        except TimeoutError:
            ready = b""
        finally:
            os.close(ready_read)
        return ready == b"1"

    async def close(self) -> None:
        """Stop slirp4netns (closing its exit fd) and close every pipe end still open."""
        for fd in (self.info_read, self.block_write, *self.owned):
            with contextlib.suppress(OSError):
                os.close(fd)
        await self._stop_helper()

    async def _stop_helper(self) -> None:
        """Stop a slirp4netns started before (it exits when its exit fd closes)."""
        if self.exit_write is not None:
            with contextlib.suppress(OSError):
                os.close(self.exit_write)
        self.exit_write = None
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.process.wait(), 2.0)
            if self.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self.process.kill()
                await self.process.wait()


_POLL = 0.005
"""Seconds between two looks at a namespace's routes while bwrap makes its loopback."""


async def _loopback_made(pid: int) -> None:
    """Return once bwrap's child ``pid`` has added 127.0.0.1 to its namespace's ``lo``.

    Raises :class:`OSError` when the child is gone first (bwrap failed), or after
    :data:`NETWORK_READY` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + NETWORK_READY
    while True:
        try:
            if "127.0.0.1" in await asyncio.to_thread(_routes, pid):
                return
        except FileNotFoundError as exc:
            raise OSError("bwrap ended before its network namespace was made") from exc
        if loop.time() > deadline:
            raise OSError("bwrap did not make its loopback device in time")
        await asyncio.sleep(_POLL)


def _routes(pid: int) -> str:
    """The routing tables of ``pid``'s network namespace (``/proc/<pid>/net/fib_trie``)."""
    with open(f"/proc/{pid}/net/fib_trie", encoding="ascii") as table:
        return table.read()


def _read_json(fd: int) -> dict[str, object]:
    """The first JSON object bwrap writes on its ``--info-fd``."""
    data = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(ValueError):
            found = json.loads(data)
            if isinstance(found, dict):
                return found
    raise OSError("bwrap reported no sandbox (it failed to start)")
