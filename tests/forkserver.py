"""``python -m bot ...`` for tests, forked from a process that has imported the bot already.

The suite starts a few hundred bot processes (``threadbot console``, ``threadbot run``
and the other commands). A fresh interpreter spends about 2 s of CPU importing the
bot's 1,100 modules before it reads a line, and on a 2-CPU machine that was the
largest part of ``make test``. So each pytest worker starts one *fork server*: a
process that imports the bot once and then forks a child per request, the way
``multiprocessing``'s forkserver start method does. The child becomes
``python -m MODULE ARGS...`` as a person runs it: its own standard streams, working
folder and environment, ``sys.argv`` and ``sys.path[0]`` as ``-m`` sets them, and the
module run as ``__main__``; it exits through the interpreter's own exit (threads
joined, ``atexit`` run, streams flushed). It is a real process: the test kills it,
signals it and reads its exit status as before (:class:`Popen` is
:class:`subprocess.Popen`; only the start differs).

What a forked child does not redo is Python's start-up: the interpreter's flags, the
hash seed and the ``PYTHON*`` variables are the fork server's. A request whose
environment sets a ``PYTHON*`` variable differently, or one that is not
``python -m MODULE``, is started as a fresh interpreter instead (the same class, the
ordinary :mod:`subprocess` path). ``THREADBOT_TEST_FORK=0`` in the environment of
``pytest`` starts every process fresh.

Wire (a ``SOCK_SEQPACKET`` pair per worker): a request is one JSON message
``{"module", "args", "cwd", "env"}`` carrying three descriptors (the child's stdin,
stdout and stderr); the answer is ``{"pid"}`` carrying one descriptor, a socket on
which the server writes the child's wait status (``os.waitpid``'s, in decimal) when it
exits, or ``{"errno", "error"}``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]

PRELOAD = (
    "bot.cli",
    "bot.commands",
    "bot.serve",
    "bot.platforms",
    "adapters.slack",
    "adapters.discord",
    "conversations.store.sql",
    "sqlalchemy.dialects.sqlite.aiosqlite",
    "aiosqlite",
    "alembic.command",
    "alembic.runtime.migration",
    "anthropic",
)
"""What the fork server imports before it forks: what every bot command imports, and
the platforms' SDKs, the SQLite driver, Alembic and the model client that running
one imports later (a module that starts a thread on import must not be here)."""

MAX_MESSAGE = 1 << 20


# The server: `python -m tests.forkserver FD`.


def main() -> None:
    """Serve requests on the socket whose descriptor is ``sys.argv[1]``; become a child
    when :func:`serve` returns one."""
    for name in PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:
        started = threading.enumerate()
        raise SystemExit(f"fork server: a preloaded module started a thread: {started}")
    control = socket.socket(fileno=int(sys.argv[1]))
    control.send(b'{"ready": true}')
    child = serve(control)
    if child is not None:
        become(*child)


def serve(control: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """Fork a child per request until the test's end of ``control`` closes (None).

    In a child, returns its request and its three descriptors, everything of the
    server's closed."""
    children: dict[int, socket.socket] = {}
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "request")
    selector.register(wake_r, selectors.EVENT_READ, "exited")
    while True:
        for key, _ in selector.select():
            if key.data == "exited":
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                _report_exits(children)
                continue
            message, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 3)
            if not message:
                return None
            request = json.loads(message)
            here = there = None
            try:
                if not os.path.isdir(request["cwd"]):
                    raise FileNotFoundError(errno.ENOENT, "No such directory", request["cwd"])
                here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
            except OSError as e:
                for fd in fds:
                    os.close(fd)
                for end in (here, there):
                    if end is not None:
                        end.close()
                control.send(json.dumps({"errno": e.errno, "error": str(e)}).encode())
                continue
            if pid == 0:
                # The child: nothing of the server stays open in it.
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                selector.close()
                os.close(wake_r)
                os.close(wake_w)
                for status in children.values():
                    status.close()
                here.close()
                there.close()
                control.close()
                return request, fds
            for fd in fds:
                os.close(fd)
            children[pid] = here
            # The child's pidfd: the test signals the process through it, never a pid
            # this server has reaped and the kernel may have given to another process.
            pidfd = os.pidfd_open(pid)
            answer = json.dumps({"pid": pid}).encode()
            socket.send_fds(control, [answer], [there.fileno(), pidfd])
            os.close(pidfd)
            there.close()


def _report_exits(children: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if (reply := children.pop(pid, None)) is not None:
            with contextlib.suppress(OSError):
                reply.send(str(status).encode())
            reply.close()


def become(request: dict[str, Any], fds: list[int]) -> None:
    """Turn this forked child into ``python -m MODULE ARGS...`` in the request's folder
    and environment, on the request's standard streams; returns (or raises SystemExit)
    as that module does."""
    for target, fd in enumerate(fds):
        if fd != target:
            os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # found again from this environment's TMPDIR
    sys.modules["__main__"] = _fresh_main()
    sys.path[0] = os.getcwd()  # `python -m` puts the working folder first
    module, args = request["module"], request["args"]
    sys.orig_argv = [sys.executable, "-m", module, *args]
    sys.argv = ["-m", *args]
    runpy._run_module_as_main(module, alter_argv=True)  # type: ignore[attr-defined]


def _fresh_main() -> types.ModuleType:
    """A ``__main__`` module as the interpreter makes one at its start (``add_main_module``
    in CPython's Python/pylifecycle.c: ``__annotations__`` and ``__builtins__``), for the
    module run as ``__main__`` to have globals of its own, not the fork server's."""
    main = types.ModuleType("__main__")
    main.__dict__.update(__annotations__={}, __builtins__=builtins)
    return main


# The test's side.


class ForkServer:
    """One fork server, started by this (pytest worker) process on first use, and again
    after it is lost (it died, or a request was cut between its question and answer)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._log: IO[bytes] | None = None
        self.environment: dict[str, str] = {}

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.environment = {
            k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "THREADBOT_"))
        } | {"PYTHONPATH": str(ROOT)}
        self._log = tempfile.TemporaryFile()
        subprocess.Popen(
            [sys.executable, "-m", "tests.forkserver", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            cwd=ROOT,
            env=self.environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )  # it exits when `ours` closes; its status is not waited for
        theirs.close()
        if not ours.recv(MAX_MESSAGE):
            ours.close()
            raise RuntimeError(f"the fork server did not start:\n{self.log()}")
        self._control = ours
        return ours

    def _lost(self) -> str:
        """Forget the server (it ends when its socket closes); what it logged."""
        if self._control is not None:
            self._control.close()
            self._control = None
        return self.log()

    def log(self) -> str:
        """What the server wrote to its stderr."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def serves(self, env: Mapping[str, str]) -> bool:
        """Whether a child with environment ``env`` can be forked: what the interpreter
        reads once at its start (``PYTHON*``, the locale's ``LANG`` and ``LC_*``, ``TZ``)
        is the server's."""
        if os.environ.get("THREADBOT_TEST_FORK") == "0":
            return False
        with self._lock:
            if self._control is None:
                self._start()

        def startup(variables: Mapping[str, str]) -> dict[str, str]:
            names = ("PYTHON", "LC_", "LANG", "TZ")
            return {k: v for k, v in variables.items() if k.startswith(names)}

        return startup(env) == startup(self.environment)

    def spawn(
        self, module: str, args: Sequence[str], cwd: str, env: Mapping[str, str], fds: Sequence[int]
    ) -> tuple[int, socket.socket, int]:
        """Fork ``python -m module args`` on ``fds`` (stdin, stdout, stderr): its pid, the
        socket its wait status arrives on, and its pidfd (pidfd_open(2))."""
        request = json.dumps({"module": module, "args": list(args), "cwd": cwd, "env": dict(env)})
        with self._lock:
            try:
                control = self._control or self._start()
                socket.send_fds(control, [request.encode()], list(fds))
                message, received, _, _ = socket.recv_fds(control, MAX_MESSAGE, 2)
            except OSError as e:
                raise RuntimeError(f"the fork server was lost:\n{self._lost()}") from e
            except BaseException:
                self._lost()  # its answer may come later: never read it as another's
                raise
            if not message:
                raise RuntimeError(f"the fork server is gone:\n{self._lost()}")
        answer = json.loads(message)
        if "pid" not in answer:
            raise OSError(answer["errno"], answer["error"], cwd)
        status, pidfd = received
        return answer["pid"], socket.socket(fileno=status), pidfd


_server = ForkServer()
"""This process's fork server (started on first use: nothing runs at import)."""


def _as_module(args: Any, executable: Any, shell: bool) -> tuple[str, list[str]] | None:
    if shell or executable is not None or isinstance(args, (str, bytes)):
        return None
    args = [os.fspath(a) for a in args]
    if len(args) >= 3 and args[0] == sys.executable and args[1] == "-m":
        return str(args[2]), [str(a) for a in args[3:]]
    return None


class Popen(subprocess.Popen):  # type: ignore[type-arg]
    """:class:`subprocess.Popen`, whose ``[sys.executable, "-m", MODULE, ...]`` is forked
    from the fork server (see the module's docstring); anything else starts as usual."""

    _status: socket.socket | None = None
    _pidfd: int | None = None
    _status_read = 0
    _forked = False

    def _execute_child(  # type: ignore[override]
        self,
        args: Any,
        executable: Any,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Sequence[int],
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: int,
        shell: bool,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        restore_signals: bool,
        gid: Any,
        gids: Any,
        uid: Any,
        umask: int,
        start_new_session: bool,
        process_group: Any = None,
    ) -> None:
        target = _as_module(args, executable, shell)
        environment = dict(os.environ if env is None else env)
        plain = (
            preexec_fn is None
            and not pass_fds
            and not start_new_session
            and process_group in (None, -1)
            and gid is None
            and gids is None
            and uid is None
            and umask < 0
        )
        if target is None or not plain or not _server.serves(environment):
            super()._execute_child(  # type: ignore[misc]
                args,
                executable,
                preexec_fn,
                close_fds,
                pass_fds,
                cwd,
                env,
                startupinfo,
                creationflags,
                shell,
                p2cread,
                p2cwrite,
                c2pread,
                c2pwrite,
                errread,
                errwrite,
                restore_signals,
                gid,
                gids,
                uid,
                umask,
                start_new_session,
                process_group,
            )
            return
        module, rest = target
        folder = os.path.abspath(os.fspath(cwd)) if cwd is not None else os.getcwd()
        fds = [p2cread, c2pwrite, errwrite]
        fds = [fd if fd != -1 else default for fd, default in zip(fds, (0, 1, 2), strict=True)]
        self.pid, self._status, self._pidfd = _server.spawn(module, rest, folder, environment, fds)
        self._child_created = True
        self._forked = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        if not self._forked:
            return super()._try_wait(wait_flags)  # type: ignore[misc]
        if self._status is None:  # read already, by another thread
            return self.pid, self._status_read
        self._status.setblocking(not wait_flags & os.WNOHANG)
        try:
            said = self._status.recv(64)
        except BlockingIOError:
            return 0, 0
        if not said:
            raise ChildProcessError(errno.ECHILD, f"the fork server lost pid {self.pid}")
        self._status_read = int(said)
        self._status.close()
        self._status = None
        self._close_pidfd()
        return self.pid, self._status_read

    def _internal_poll(self, _deadstate: Any = None, **kwargs: Any) -> int | None:  # type: ignore[override]
        if not self._forked:
            return super()._internal_poll(_deadstate, **kwargs)  # type: ignore[misc]
        if self.returncode is None and self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
            try:
                if self.returncode is None:
                    pid, status = self._try_wait(os.WNOHANG)
                    if pid == self.pid:
                        self._handle_exitstatus(status)  # type: ignore[attr-defined]
            except OSError:
                if _deadstate is None:  # as subprocess.Popen: at its end, say it is gone
                    raise
                self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the process unless it has ended; a forked child's through its
        pidfd (the fork server reaps it, so its pid may name another process by then)."""
        if not self._forked:
            super().send_signal(sig)
            return
        self.poll()
        if self.returncode is None and self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def exit_fd(self) -> int:
        """A new descriptor, for the caller to close, that becomes readable once the
        process has exited and its status can be read at once: a copy of a forked child's
        status socket, a pidfd of any other (pidfd_open(2)). Only while it runs."""
        if self._status is not None:
            return os.dup(self._status.fileno())
        return os.pidfd_open(self.pid)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def __del__(self, *args: Any, **kwargs: Any) -> None:
        self._close_pidfd()
        super().__del__(*args, **kwargs)


def run(
    args: Sequence[str],
    *,
    input: str | bytes | None = None,
    timeout: float | None = None,
    check: bool = False,
    capture_output: bool = False,
    **kwargs: Any,
) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run` over :class:`Popen` (same arguments, same errors)."""
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    with Popen(args, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            process.kill()
            e.output, e.stderr = process.communicate()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        assert code is not None
    if check and code:
        raise subprocess.CalledProcessError(code, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)


class Process:
    """What a test uses of :class:`asyncio.subprocess.Process`, over :class:`Popen`:
    ``stdout`` and ``stderr`` as stream readers, ``wait``, ``returncode``, ``pid``,
    ``send_signal``, ``terminate`` and ``kill``."""

    def __init__(
        self,
        popen: Popen,
        stdout: asyncio.StreamReader | None,
        stderr: asyncio.StreamReader | None,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdout = stdout
        self.stderr = stderr
        self.stdin: IO[bytes] | None = popen.stdin
        self._exited: asyncio.Future[None] | None = None

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def send_signal(self, signum: int) -> None:
        self._popen.send_signal(signum)

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    async def wait(self) -> int:
        """The exit code (``-N``: killed by signal N), once the process has exited; any
        number of callers may wait at once, and one cancelled leaves the others waiting."""
        if (code := self._popen.poll()) is not None:
            return code
        if self._exited is None:
            self._exited = _readable(self._popen.exit_fd())
        await asyncio.shield(self._exited)
        return self._popen.wait()  # exited: its status is there


def _readable(fd: int) -> asyncio.Future[None]:
    """A future done once ``fd`` is readable; ``fd`` is closed then."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def readable() -> None:
        loop.remove_reader(fd)
        os.close(fd)
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, readable)
    return done


async def create_subprocess_exec(
    *args: str, stdout: int | None = None, stderr: int | None = None, **kwargs: Any
) -> Process:
    """:func:`asyncio.create_subprocess_exec` for what :class:`Process` offers."""
    popen = Popen(list(args), stdout=stdout, stderr=stderr, **kwargs)
    loop = asyncio.get_running_loop()

    async def reader(pipe: IO[bytes] | None) -> asyncio.StreamReader | None:
        if pipe is None:
            return None
        stream = asyncio.StreamReader(limit=2**16, loop=loop)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream, loop=loop), pipe)
        return stream

    return Process(popen, await reader(popen.stdout), await reader(popen.stderr))


if __name__ == "__main__":
    main()
