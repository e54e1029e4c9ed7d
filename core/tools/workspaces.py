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
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.tools.sandbox import Sandbox
from core.vocabulary.errors import ToolError

BRANCH_PREFIX = "threadbot/"
GIT_TIMEOUT = 300.0
"""Seconds a clone (or a status) may take before the call fails."""
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


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

    def _run_in_workspace(self, args: list[str], path: Path, *, check: bool = True) -> str:
        """git in a clone the agent has worked in: in the sandbox, or hardened without."""
        hardened = ["--no-optional-locks", "-c", "core.fsmonitor=false", *args]
        if self._sandbox is None:
            return self._run(hardened, cwd=path, check=check)
        sandbox = self._sandbox
        return _completed(
            args[0],
            lambda argv, env, cwd, check, **options: sandbox.run(argv, path, **options),
            [self._git, *_NO_HOOKS, *hardened],
            env={},
            cwd=path,
            check=check,
        )

    def _run(self, args: list[str], *, cwd: Path, check: bool = True) -> str:
        """``git -c core.hooksPath=/dev/null ARGS`` in ``cwd``; its stdout.

        Raises :class:`ToolError` with git's message when it fails (``check``).
        """
        env = {k: v for k, v in os.environ.items() if not _secret_name(k)}
        env["GIT_TERMINAL_PROMPT"] = "0"  # never wait for a password on stdin
        return _completed(
            args[0], subprocess.run, [self._git, *_NO_HOOKS, *args], env=env, cwd=cwd, check=check
        )


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
