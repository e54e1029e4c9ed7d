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
  ``passwd`` and ``group`` holding just the sandbox user, and ``hosts`` with the
  loopback names and the sandbox's host name (:data:`HOSTS`: a project's tests
  reach ``localhost``); ``resolv.conf`` only with a granted network. No ``/run``,
  no host home, no data directory, database or settings file;
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

import contextlib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.tools.sandbox_etc import written
from core.tools.sandbox_network import Network

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
TMP_BYTES = 512 * 1024 * 1024
"""Size of a command's private ``/tmp`` (memory: it is a tmpfs)."""
NOBODY = (65534, 65534)
"""The host uid and gid bwrap runs as when the bot runs as root (see :class:`Sandbox`)."""
HOSTNAME = "threadbot"
"""The sandbox's host name (its own UTS namespace)."""
HOSTS = f"127.0.0.1\tlocalhost {HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
"""The sandbox's ``/etc/hosts``: the loopback names, and its own host name."""


@dataclass(frozen=True)
class Launch:
    """How to start one sandboxed command: ``argv``, ``env``, the fds to pass, and the
    network to attach once bwrap has made its namespaces (None: no network)."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...] = ()
    network: Network | None = None
    child_fds: tuple[int, ...] = ()
    """Descriptors only the child needs: close them here once it is started."""
    stdin: int | None = None
    """A descriptor the first process reads as its stdin (None: ``/dev/null``)."""

    def spawned(self) -> None:
        """Close this process's copies of the descriptors the child took."""
        for fd in self.child_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.network is not None:
            self.network.close_child_ends()


class Sandbox:
    """Builds the bwrap command line of a sandboxed command (see the module docstring).

    ``bwrap``: the bubblewrap binary; ``network_helper``: slirp4netns, None where
    a granted network cannot be given (a granted command then fails with a clear
    error); ``env``: the variables a command sees (``PATH``, ``LANG`` ... ;
    ``HOME`` is set to the sandbox's own); ``state_dir``: where the synthetic
    ``/etc`` files are written (by default one directory shared by the bot processes
    of this user that write the same files: :func:`shared_etc`).
    ``run_as``: the host (uid, gid) commands run as when the bot runs as root
    (``nobody`` by default). An unprivileged bwrap maps the sandbox's user to the
    host user that started it, so from a root bot a command would be host root:
    it could write ``/proc/sys`` (a ``core_pattern`` that runs its script as root)
    or plant setuid-root files. So a root bot's bwrap sets up the namespaces
    without a user namespace and the command drops to ``run_as`` inside, with
    ``setpriv`` and no capabilities; a bot that is not root runs bwrap with a user
    namespace, the sandbox's user being the bot's own outside.
    """

    def __init__(
        self,
        bwrap: str,
        *,
        network_helper: str | None = None,
        env: Mapping[str, str] | None = None,
        state_dir: Path | None = None,
        run_as: tuple[int, int] | None = NOBODY if os.geteuid() == 0 else None,
    ) -> None:
        self.bwrap = bwrap
        self.run_as = run_as
        self.network_helper = network_helper
        base = dict(env or DEFAULT_ENV)
        self.env = base | {"HOME": SANDBOX_HOME, "USER": "threadbot", "LOGNAME": "threadbot"}
        uid, gid = run_as or (SANDBOX_UID, SANDBOX_UID)
        files = {
            "passwd": f"threadbot:x:{uid}:{gid}:threadbot:{SANDBOX_HOME}:/bin/sh\n",
            "group": f"threadbot:x:{gid}:\n",
            "resolv.conf": f"nameserver {SLIRP_DNS}\n",
            "hosts": HOSTS,
        }
        self._etc = written(files, state_dir)

    def run(
        self, argv: Sequence[str], workspace: Path, **options: Any
    ) -> subprocess.CompletedProcess[Any]:
        """Run ``argv`` in the sandbox to its end, without a network (blocking).

        ``options`` go to :func:`subprocess.run` (``input``, ``capture_output``, ``text``,
        ``timeout``...). Raises what it raises, and :class:`OSError`.
        """
        self.prepare(workspace)
        launch = self.launch(argv, workspace)
        try:
            return subprocess.run(
                launch.argv, env=launch.env, pass_fds=launch.pass_fds, check=False, **options
            )
        finally:
            launch.spawned()

    def prepare(self, workspace: Path) -> None:
        """Hand ``workspace`` over to ``run_as`` (blocking; nothing without one)."""
        if self.run_as is not None:
            hand_over(workspace, self.run_as)

    def launch(self, argv: Sequence[str], workspace: Path, *, network: bool = False) -> Launch:
        """The :class:`Launch` of ``argv`` confined to ``workspace``.

        Raises :class:`OSError` when ``network`` is asked and no helper is installed.
        """
        argv = [*_setpriv(self.run_as), *argv]  # a root bot's command drops to run_as
        args = [self.bwrap, *self._fixed()]
        for parent in reversed(workspace.parents):  # reachable by the command's user
            if str(parent) not in ("/", "/tmp"):
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--bind", str(workspace), str(workspace)]
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
        net = Network(
            info_read=info_read,
            block_write=block_write,
            helper=self.network_helper,
            owned=[info_write, block_read],
            join_userns=self.run_as is None,
        )
        return Launch(argv=args, env=dict(self.env), pass_fds=(info_write, block_read), network=net)

    def _fixed(self) -> list[str]:
        """The options every sandboxed command gets (namespaces, the file system)."""
        ids = str(SANDBOX_UID)
        user = (
            ["--unshare-user", "--uid", ids, "--gid", ids, "--disable-userns"]
            if self.run_as is None
            else []  # root: no user namespace; the command drops to run_as (setpriv)
        )
        args = [
            *user,
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            HOSTNAME,
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
        for made in ("/etc", "/etc/ssl", "/home"):  # readable by the command's user
            args += ["--perms", "0755", "--dir", made]
        for entry in ETC_ALLOWED:
            args += ["--ro-bind-try", f"/etc/{entry}", f"/etc/{entry}"]
        args += ["--ro-bind", str(self._etc / "passwd"), "/etc/passwd"]
        args += ["--ro-bind", str(self._etc / "group"), "/etc/group"]
        args += ["--ro-bind", str(self._etc / "hosts"), "/etc/hosts"]
        args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--dev", "/dev"]
        args += ["--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
        args += ["--dir", SANDBOX_HOME]
        if self.run_as is not None:  # made by root bwrap: the command's user must own it
            args += ["--chmod", "1777", SANDBOX_HOME]
        return args


def _setpriv(run_as: tuple[int, int] | None) -> list[str]:
    """``setpriv`` (util-linux) to start bwrap as ``run_as``, or nothing."""
    if run_as is None:
        return []
    uid, gid = run_as
    return [
        "/usr/bin/setpriv",
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def hand_over(workspace: Path, owner: tuple[int, int]) -> None:
    """Make ``workspace`` and everything in it ``owner``'s (uid, gid), so that a command
    running as that user can write what the bot wrote there. Blocking."""
    uid, gid = owner
    os.chown(workspace, uid, gid)
    for root, dirs, files in os.walk(workspace):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)


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
test "$(id -u)" != 0 || echo "UID commands run as root"
test -w /proc/sys/kernel/core_pattern && echo "SYSCTL /proc/sys is writable"
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
        done = sandbox.run(
            ["/bin/sh", "-c", _PROBE_SCRIPT],
            workspace,
            input=canary + "\n",
            capture_output=True,
            text=True,
            timeout=timeout,
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
