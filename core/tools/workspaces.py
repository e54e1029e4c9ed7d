"""Each conversation's workspace: an empty directory, or its own clone of a repository.

When the settings name a git repository (``git_repo``, per channel), a
conversation's workspace is its own clone of it on a branch
``threadbot/<conversation>``, made before its first tool call. A clone, not a
worktree: a worktree shares the repository's ``.git`` (its hooks and config), so
a command in one conversation could plant a hook that runs in another, or in the
operator's checkout. A local repository is cloned with ``--no-hardlinks``: its
objects are copied, so nothing a command does to its clone's files reaches the
original (``--shared`` or hardlinked objects would let it, and a sandboxed
command could not read objects outside its workspace anyway). The bot's own git
runs with ``-c core.hooksPath=/dev/null``: no hook of the repository runs in the
bot's process.

At the end the final answer names the branch and the files changed on it
(:meth:`GitWorkspaces.changes`). By then the clone's ``.git/config`` is whatever
the agent's commands made it, and git runs commands that a config names
(``core.fsmonitor``, a ``filter.*.clean`` for ``git status``): so that git runs in
the sandbox too, as the agent's commands do. Without a sandbox it runs with
those keys overridden where git allows it (the fallback asks before every
command anyway). Blocking git runs in a thread.

A delegation to the expert works in a fork of the workspace
(:meth:`GitWorkspaces.fork`, :func:`fork_path`: ``<workspace>-delegation-<n>``
beside it): a copy of the folder, on a branch ``threadbot/<conversation>-delegation-<n>``
when the workspace is a clone (its work so far committed on the conversation's branch
first, so the branch starts from all of it). Its work comes back by
:meth:`GitWorkspaces.merge`: on a clone, the fork's branch committed, carried over
as a bundle (a file: each git runs in the sandbox of its own workspace, the
workspaces never see each other) and merged into the conversation's branch; on a
plain copy, its files copied back. The fork is kept (the sweeper removes it with the
workspace).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.tools._copies import carry, copy_tree, remove_file, replace_contents
from core.tools.sandbox import Sandbox
from core.vocabulary.errors import ToolError

BRANCH_PREFIX = "threadbot/"
GIT_TIMEOUT = 300.0
"""Seconds a clone (or a status) may take before the call fails."""
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
_IDENTITY = ("-c", "user.name=threadbot", "-c", "user.email=threadbot@localhost")
"""Who the bot's own commits are by (a delegation's), whatever the clone's config says."""
_BUNDLE = ".git/threadbot-delegation.bundle"
"""Where a fork's branch is carried to the workspace, as a bundle (inside each ``.git``)."""


def fork_path(workspace: Path, n: int) -> Path:
    """The folder of delegation ``n``'s fork of ``workspace``: beside it,
    ``<workspace>-delegation-<n>``."""
    return workspace.with_name(f"{workspace.name}-delegation-{n}")


def forks_of(workspace: Path) -> list[Path]:
    """The delegations' forks of ``workspace`` there are (:func:`fork_path`)."""
    if not workspace.parent.is_dir():
        return []
    return sorted(workspace.parent.glob(f"{workspace.name}-delegation-*"))


@dataclass(frozen=True)
class Changes:
    """What a conversation changed in its clone: its branch and the changed paths."""

    branch: str
    files: tuple[str, ...]


class Workspaces(Protocol):
    """Prepares a conversation's workspace and tells what changed in it."""

    async def prepare(self, conversation_id: str, path: Path, repo: str | None) -> None:
        """Make ``path`` ready before a tool runs there; raises :class:`ToolError`."""
        ...

    async def changes(self, conversation_id: str, path: Path, repo: str | None) -> Changes | None:
        """The branch and changed files of a cloned workspace; None without a repository."""
        ...

    async def fork(self, path: Path, into: Path, branch: str | None) -> None:
        """Make ``into`` a fork of the workspace ``path`` (on ``branch`` when it is a clone;
        None: a plain copy); a fork made already is left as it is. Raises
        :class:`ToolError`."""
        ...

    async def merge(
        self, path: Path, fork: Path, branch: str | None, *, keep: Sequence[str] = ()
    ) -> None:
        """Bring the work done in ``fork`` back into ``path`` (``branch`` merged, or the
        files copied back, what ``path``'s folders named in ``keep`` alone hold kept);
        ``fork`` is kept. Raises :class:`ToolError`."""
        ...


class GitWorkspaces:
    """Workspaces as directories, cloned from ``repo`` when one is given.

    ``git``: the git binary. The clone's environment is the bot's minus every
    variable whose name says it is a secret (the clone may reach a remote over
    HTTPS or SSH with the operator's own credential helpers and keys).
    """

    def __init__(self, git: str = "git", sandbox: Sandbox | None = None) -> None:
        self._git = git
        self._sandbox = sandbox

    async def prepare(self, conversation_id: str, path: Path, repo: str | None) -> None:
        """Create ``path``; with ``repo``, clone it there on ``threadbot/<conversation>``
        (once: a workspace that is a clone already is left as it is)."""
        await asyncio.to_thread(self._prepare, conversation_id, path, repo)

    async def changes(self, conversation_id: str, path: Path, repo: str | None) -> Changes | None:
        """The branch and the files changed on it since the clone (committed or not)."""
        if repo is None or not (path / ".git").exists():
            return None
        return await asyncio.to_thread(self._changes, path)

    async def fork(self, path: Path, into: Path, branch: str | None) -> None:
        """Make ``into`` a copy of ``path`` to work on apart (see the module docstring):
        with ``branch``, the work so far committed in ``path`` first and ``branch`` made
        in the copy; a fork there already (a run going on after a restart) is left as it
        is. Made under a temporary name and renamed at the end, so a fork is never
        half made. Raises :class:`ToolError` with git's or the file system's reason."""
        await asyncio.to_thread(self._fork, path, into, branch)

    async def merge(
        self, path: Path, fork: Path, branch: str | None, *, keep: Sequence[str] = ()
    ) -> None:
        """Bring the fork's work back (see the module docstring): with ``branch``, the
        fork's changes committed on it and the branch merged into ``path``'s (a merge
        that fails is aborted: :class:`ToolError`); without, ``path`` made to hold what
        ``fork`` holds, but for what only ``path``'s folders named in ``keep`` hold (the
        files people shared while the expert worked). Doing it again changes nothing
        more. Raises :class:`ToolError`."""
        await asyncio.to_thread(self._merge, path, fork, branch, keep)

    def _fork(self, path: Path, into: Path, branch: str | None) -> None:
        if into.exists():
            return
        partial = into.with_name(into.name + ".partial")
        try:
            shutil.rmtree(partial, ignore_errors=True)
            if branch is not None:
                self._commit_all(path, "threadbot: the work so far, before the expert's")
            copy_tree(path, partial)
            if branch is not None:
                self._run_in_workspace(["checkout", "--quiet", "-b", branch], partial)
            partial.rename(into)
        except OSError as exc:
            raise ToolError(f"the workspace could not be copied: {exc}") from exc

    def _merge(self, path: Path, fork: Path, branch: str | None, keep: Sequence[str]) -> None:
        try:
            if branch is None:
                replace_contents(path, fork, keep=keep)
                return
            head = self._run_in_workspace(["symbolic-ref", "--quiet", "HEAD"], fork, check=False)
            if head.strip() != f"refs/heads/{branch}":  # its work would not come back with it
                raise ToolError(
                    f"the expert left {branch} (HEAD is {head.strip() or 'detached'}): "
                    "its work is not on the branch that is merged"
                )
            self._commit_all(fork, f"threadbot: the expert's work on {branch}")
            self._run_in_workspace(["bundle", "create", "--quiet", _BUNDLE, branch], fork)
            carry(fork, path, _BUNDLE)
            ref = f"refs/heads/{branch}"
            self._run_in_workspace(["fetch", "--quiet", _BUNDLE, f"+{ref}:{ref}"], path)
            try:
                self._run_in_workspace(
                    ["merge", "--quiet", "--no-edit", branch], path, config=_IDENTITY
                )
            except ToolError:
                self._run_in_workspace(["merge", "--abort"], path, check=False)
                raise
        except OSError as exc:
            raise ToolError(f"the expert's work could not be brought back: {exc}") from exc
        finally:
            remove_file(fork, _BUNDLE)
            remove_file(path, _BUNDLE)

    def _commit_all(self, path: Path, message: str) -> None:
        """Commit everything changed in the clone ``path`` (nothing when nothing is)."""
        status = self._run_in_workspace(["status", "--porcelain", "--untracked-files=all"], path)
        if not status.strip():
            return
        self._run_in_workspace(["add", "--all"], path)
        self._run_in_workspace(
            ["commit", "--quiet", "--no-verify", "-m", message], path, config=_IDENTITY
        )

    def _prepare(self, conversation_id: str, path: Path, repo: str | None) -> None:
        if repo is None:
            path.mkdir(parents=True, exist_ok=True)
            return
        if (path / ".git").exists():
            return
        if path.exists() and any(path.iterdir()):
            raise ToolError(f"the workspace {path.name} is not empty, so {repo} cannot be cloned")
        path.parent.mkdir(parents=True, exist_ok=True)
        local = not _is_remote(repo)
        clone = ["clone", "--quiet", *(["--no-hardlinks"] if local else []), repo, str(path)]
        plain = without_credentials(repo)
        try:
            self._run(clone, cwd=path.parent)
            if plain != repo:  # the agent's commands read .git/config: no token there
                self._run(["remote", "set-url", "origin", plain], cwd=path)
            self._run(["checkout", "--quiet", "-b", BRANCH_PREFIX + conversation_id], cwd=path)
        except ToolError as exc:
            said = str(exc).replace(repo, plain)
            for part in _credential_parts(repo):
                said = said.replace(part, "***")
            raise ToolError(said) from None

    def _changes(self, path: Path) -> Changes:
        run = self._run_in_workspace
        branch = run(["rev-parse", "--abbrev-ref", "HEAD"], path).strip()
        start = run(
            ["rev-parse", "--verify", "--quiet", "refs/remotes/origin/HEAD"], path, check=False
        ).strip()
        files: set[str] = set()
        if start:
            diff = run(["diff", "--name-only", "--no-ext-diff", start, "HEAD"], path, check=False)
            files |= {line for line in diff.splitlines() if line}
        status = run(["status", "--porcelain", "--untracked-files=all"], path)
        files |= {line[3:].split(" -> ")[-1] for line in status.splitlines() if len(line) > 3}
        return Changes(branch=branch, files=tuple(sorted(files)))

    def _run_in_workspace(
        self, args: list[str], path: Path, *, check: bool = True, config: Sequence[str] = ()
    ) -> str:
        """git in a clone the agent has worked in: in the sandbox, or hardened without;
        ``config``: ``-c`` options of the bot's own before ``args``."""
        hardened = ["--no-optional-locks", "-c", "core.fsmonitor=false", *config, *args]
        if self._sandbox is None:
            return self._run(hardened, cwd=path, check=check, what=args[0])
        sandbox = self._sandbox
        return _completed(
            args[0],
            lambda argv, env, cwd, check, **options: sandbox.run(argv, path, **options),
            [self._git, *_NO_HOOKS, *hardened],
            env={},
            cwd=path,
            check=check,
        )

    def _run(self, args: list[str], *, cwd: Path, check: bool = True, what: str = "") -> str:
        """``git -c core.hooksPath=/dev/null ARGS`` in ``cwd``; its stdout.

        Raises :class:`ToolError` with git's message when it fails (``check``), naming
        ``what`` git did (default: ``args[0]``).
        """
        env = {k: v for k, v in os.environ.items() if not _secret_name(k)}
        env["GIT_TERMINAL_PROMPT"] = "0"  # never wait for a password on stdin
        argv = [self._git, *_NO_HOOKS, *args]
        return _completed(what or args[0], subprocess.run, argv, env=env, cwd=cwd, check=check)


def _completed(
    what: str,
    run: Callable[..., subprocess.CompletedProcess[str]],
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    check: bool,
) -> str:
    """Run ``argv``; its stdout. Raises :class:`ToolError` with git's message (``check``)."""
    try:
        done = run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolError(f"git {what} failed: {exc}") from exc
    if check and done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise ToolError(f"git {what} failed: {said[-1] if said else done.returncode}")
    return done.stdout


def without_credentials(url: str) -> str:
    """``url`` without a password or token: an HTTP(S) URL loses what precedes its ``@``
    and its query; an SSH user (``git@host:path``) stays, it is no secret."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        head, at, tail = url.partition("@")
        if at and ":" in head.split("//")[-1]:  # user:password@ in any other URL
            return f"{head.split('//')[0] + '//' if '//' in head else ''}{tail}"
        return url
    host_part, slash, path = rest.partition("/")
    host = host_part.rpartition("@")[2]
    return f"{scheme}://{host}{slash}{path.partition('?')[0]}"


def _credential_parts(url: str) -> list[str]:
    """What :func:`without_credentials` takes out of ``url`` (to hide it in messages)."""
    parts = []
    rest = url.partition("://")[2] or url
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    if at and userinfo and url != without_credentials(url):
        parts += [userinfo, *userinfo.split(":")]
    query = url.partition("?")[2]
    if query:
        parts += [query, *[p.partition("=")[2] for p in query.split("&") if "=" in p]]
    return sorted({p for p in parts if len(p) >= 4}, key=len, reverse=True)


def _is_remote(repo: str) -> bool:
    """A URL (``https://``, ``ssh://``, ``git@host:path``) rather than a local path."""
    return "://" in repo or ("@" in repo and ":" in repo.split("@", 1)[1])


def _secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in ("TOKEN", "SECRET", "KEY", "PASSWORD"))
