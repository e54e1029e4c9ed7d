"""The sandbox ``run_command`` runs in: bubblewrap, and slirp4netns for a granted network.

A command the model asks for may be written by whoever wrote into the channel (a
prompt injection): it must not reach the bot's tokens, files outside its
workspace, the network, a local service, or outlive its call. Under bubblewrap
(``bwrap``, https://github.com/containers/bubblewrap, bwrap(1)) each command gets:

- its own user (uid and gid :data:`SANDBOX_UID`, an unprivileged user inside a
  user namespace), PID, IPC, UTS and network namespaces, ``--die-with-parent``
  and ``--new-session`` (no TIOCSTI into the bot's terminal);
- the workspace read-write at its own path, ``/usr`` read-only (with ``/bin``,
  ``/lib``... as the host has them), a private ``/tmp`` and home, ``/dev`` and a
  ``/proc`` of its own PID namespace only;
- of ``/etc`` only an allow-list (:data:`ETC_ALLOWED`) and a synthetic
  ``passwd`` and ``group`` holding just the sandbox user; ``resolv.conf`` only
  with a granted network. No ``/run``, no host home, no data directory,
  database or settings file;
- the environment of :attr:`Sandbox.env` only: ``bwrap`` itself is started with
  it (``/proc/1/environ`` inside is bwrap's), and nothing secret is ever on its
  command line (``/proc/*/cmdline``).

Every process a command starts lives in its PID namespace, which the kernel ends
when its first process (bwrap's init) exits: on completion, on a timeout or a
stop (the caller kills bwrap's process group), and when the bot dies
(``--die-with-parent``); ``setsid`` and double forks included (pid_namespaces(7)).

No network unless a policy rule grants it (``network = true``): then
``slirp4netns --disable-host-loopback`` gives the namespace a user-mode network
whose traffic never reaches the host's 127.0.0.1, ``::1`` or its Unix sockets
(https://github.com/rootless-containers/slirp4netns). bwrap waits (``--block-fd``)
until slirp4netns has configured the namespace it reported (``--info-fd``).

:func:`probe` runs the real thing at start (namespaces, ``/proc``, the network
unshare, and that the bot's environment is unreadable from inside), not
``bwrap --version``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_UID = 1000
"""The uid and gid commands run as inside the sandbox (``threadbot``)."""
SANDBOX_HOME = "/home/threadbot"
DEFAULT_ENV: Mapping[str, str] = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
"""The environment a sandboxed command gets, besides ``HOME``, ``USER`` and ``LOGNAME``."""
ETC_ALLOWED = (
    "ssl/certs",
    "ld.so.cache",
    "localtime",
    "nsswitch.conf",
    "alternatives",
)
"""The host's ``/etc`` entries a command may read (besides the synthetic passwd/group)."""
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""Host directories outside ``/usr`` that hold programs and libraries (often symlinks)."""
SLIRP_DNS = "10.0.2.3"
"""The DNS forwarder slirp4netns offers inside the namespace (slirp4netns(1))."""
NETWORK_READY = 10.0
"""Seconds slirp4netns may take to configure a granted network."""
NETWORK_TRIES = 5
"""Times slirp4netns is started on one command's namespaces before the command fails."""


@dataclass(frozen=True)
class Launch:
    """How to start one sandboxed command: ``argv``, ``env``, the fds to pass, and the
    network to attach once bwrap has made its namespaces (None: no network)."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    network: _Network | None = None


@dataclass
class _Network:
    """The pipes bwrap reports on and waits for, and the slirp4netns serving it."""

    info_read: int
    block_write: int
    helper: str
    process: asyncio.subprocess.Process | None = None
    exit_write: int | None = None
    owned: list[int] = field(default_factory=list)

    def close_child_ends(self) -> None:
        """Close this process's copies of the pipe ends bwrap took (after the spawn)."""
        for fd in self.owned:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.owned.clear()

    async def attach(self) -> None:
        """Read bwrap's child pid, start slirp4netns on its namespace, then let bwrap go.

        slirp4netns may find the namespaces not yet ready to join (bwrap reports the
        child before it has finished setting them up): it is started again, up to
        :data:`NETWORK_TRIES` times. Raises :class:`OSError` when bwrap reports
        nothing or slirp4netns does not come up (the caller kills the command).
        """
        info = await asyncio.to_thread(_read_json, self.info_read)
        pid = int(str(info["child-pid"]))
        for attempt in range(NETWORK_TRIES):
            if await self._start_helper(pid):
                os.write(self.block_write, b"1")
                return
            await asyncio.sleep(0.02 * (attempt + 1))
        raise OSError("slirp4netns did not configure the network")

    async def _start_helper(self, pid: int) -> bool:
        """Start slirp4netns on ``pid``'s namespaces; True once it says it is ready."""
        await self._stop_helper()
        ready_read, ready_write = os.pipe()
        exit_read, exit_write = os.pipe()
        self.exit_write = exit_write
        # An unprivileged bwrap makes the network namespace inside its user namespace:
        # slirp4netns joins that one too (as root it need not, and must not).
        userns = [] if os.geteuid() == 0 else [f"--userns-path=/proc/{pid}/ns/user"]
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


class Sandbox:
    """Builds the bwrap command line of a sandboxed command (see the module docstring).

    ``bwrap``: the bubblewrap binary; ``network_helper``: slirp4netns, None where
    a granted network cannot be given (a granted command then fails with a clear
    error); ``env``: the variables a command sees (``PATH``, ``LANG`` ... ;
    ``HOME`` is set to the sandbox's own); ``state_dir``: where the synthetic
    ``/etc`` files are written (a private temporary directory by default).
    """

    def __init__(
        self,
        bwrap: str,
        *,
        network_helper: str | None = None,
        env: Mapping[str, str] | None = None,
        state_dir: Path | None = None,
    ) -> None:
        self.bwrap = bwrap
        self.network_helper = network_helper
        base = dict(env or DEFAULT_ENV)
        self.env = base | {"HOME": SANDBOX_HOME, "USER": "threadbot", "LOGNAME": "threadbot"}
        self._etc = state_dir or Path(tempfile.mkdtemp(prefix="threadbot-sandbox-"))
        self._etc.mkdir(parents=True, exist_ok=True)
        (self._etc / "passwd").write_text(
            f"threadbot:x:{SANDBOX_UID}:{SANDBOX_UID}:threadbot:{SANDBOX_HOME}:/bin/sh\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        )
        (self._etc / "group").write_text(f"threadbot:x:{SANDBOX_UID}:\nnogroup:x:65534:\n")
        (self._etc / "resolv.conf").write_text(f"nameserver {SLIRP_DNS}\n")

    def launch(self, argv: Sequence[str], workspace: Path, *, network: bool = False) -> Launch:
        """The :class:`Launch` of ``argv`` confined to ``workspace``.

        Raises :class:`OSError` when ``network`` is asked and no helper is installed.
        """
        args = [self.bwrap, *self._fixed(), "--bind", str(workspace), str(workspace)]
        args += ["--chdir", str(workspace)]
        if not network:
            args += ["--unshare-net", "--", *argv]
            return Launch(argv=args, env=dict(self.env))
        if self.network_helper is None:
            raise OSError("a network was granted, but slirp4netns is not installed")
        info_read, info_write = os.pipe()
        block_read, block_write = os.pipe()
        args += ["--ro-bind", str(self._etc / "resolv.conf"), "/etc/resolv.conf"]
        args += ["--unshare-net", "--info-fd", str(info_write), "--block-fd", str(block_read)]
        args += ["--", *argv]
        net = _Network(
            info_read=info_read,
            block_write=block_write,
            helper=self.network_helper,
            owned=[info_write, block_read],
        )
        return Launch(argv=args, env=dict(self.env), pass_fds=(info_write, block_read), network=net)

    def _fixed(self) -> list[str]:
        """The options every sandboxed command gets (namespaces, the file system)."""
        args = [
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--hostname",
            "threadbot",
            "--die-with-parent",
            "--new-session",
            "--clearenv",
            *[part for name, value in self.env.items() for part in ("--setenv", name, value)],
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        for name in TOP_LEVEL:
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{name}"]
        for entry in ETC_ALLOWED:
            args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
        args += ["--ro-bind", str(self._etc / "passwd"), "/etc/passwd"]
        args += ["--ro-bind", str(self._etc / "group"), "/etc/group"]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        args += ["--dir", SANDBOX_HOME]
        return args


def find_sandbox(env: Mapping[str, str] | None = None) -> Sandbox | None:
    """A :class:`Sandbox` from the installed bwrap (and slirp4netns), or None without bwrap."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    return Sandbox(bwrap, network_helper=shutil.which("slirp4netns"), env=env)


LEAK_PROBLEM = "the bot's environment is readable"
"""The problem :func:`probe` reports when a ``/proc/*/environ`` or ``cmdline`` inside holds
its canary."""


@dataclass(frozen=True)
class Probe:
    """What :func:`probe` found: ``ok`` when every check passed, else ``problems``.

    ``ran``: the probe's command ran to its end inside the sandbox, so ``problems``
    are what it found there (False: bwrap is missing or could not start it).
    """

    ok: bool
    problems: tuple[str, ...] = ()
    ran: bool = False

    @property
    def leaked(self) -> bool:
        """Whether the canary in a process of the bot's user was readable from inside."""
        return LEAK_PROBLEM in self.problems


_PROBE_SCRIPT = f"""\
read -r canary; printf %s "$canary" > /tmp/canary
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f"; echo; done 2>/dev/null \
  | grep -qFf /tmp/canary && echo "LEAK {LEAK_PROBLEM}"
test -r /proc/self/status || echo "NOPROC no /proc of its own"
grep -v '^ *lo:' /proc/net/dev | grep -q ':' && echo "NET a network device besides lo"
test "$(id -u)" = "{SANDBOX_UID}" || echo "UID commands do not run as the sandbox user"
test -e /etc/hostname && echo "ETC the host's /etc is visible"
echo DONE
"""
"""The probe's script: the canary comes on stdin (never on a command line it reads)."""


def probe(sandbox: Sandbox, workspace: Path, *, timeout: float = 20.0) -> Probe:
    """Run a command in ``sandbox`` and check it is confined (blocking; at start).

    Starts a stand-in for the bot (:func:`_stand_in`: a process of this user with a
    random canary in its environment) for the duration, then checks from inside
    that no ``/proc/*/environ`` or ``cmdline`` holds the canary, that ``/proc`` is
    the sandbox's own, that only the loopback device exists (the network
    namespace), that the command runs as the sandbox user and that the host's
    ``/etc`` is not there. Never raises: a failure is a :class:`Probe` with the
    reasons.
    """
    canary = "threadbot-probe-" + os.urandom(8).hex()
    stand_in: subprocess.Popen[bytes] | None = None
    try:
        workspace.mkdir(parents=True, exist_ok=True)
        stand_in = _stand_in(canary)
        launch = sandbox.launch(["/bin/sh", "-c", _PROBE_SCRIPT], workspace)
        done = subprocess.run(
            launch.argv,
            env=launch.env,
            input=canary + "\n",
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return Probe(ok=False, problems=(f"bwrap could not run: {exc}",))
    finally:
        if stand_in is not None:
            stand_in.kill()
            stand_in.wait()
    lines = done.stdout.splitlines()
    if done.returncode != 0 or "DONE" not in lines:
        said = (done.stderr or done.stdout).strip().splitlines()
        return Probe(ok=False, problems=(f"bwrap failed: {said[-1] if said else done.returncode}",))
    problems = tuple(line.split(" ", 1)[1] for line in lines if line != "DONE" and " " in line)
    return Probe(ok=not problems, problems=problems, ran=True)


def _stand_in(canary: str) -> subprocess.Popen[bytes]:
    """A process of the bot's user holding ``canary`` in its environment, as the bot holds
    its tokens. The bot's own cannot: ``/proc/<pid>/environ`` shows the environment a
    process started with, not a variable set since (proc(5))."""
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={"PATH": os.defpath, "THREADBOT_PROBE_CANARY": canary},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
