"""``threadbot doctor``: what works in this installation, and what does not.

One line per check, in this order, each marked ``✓`` (works), ``✗`` (does not:
what to do) or ``–`` (skipped: why)::

    ✓ sandbox: bubblewrap /usr/bin/bwrap confines commands (own user, PID, IPC and ...
    ✓ sandbox secrets: the bot's environment cannot be read from inside the sandbox ...
    ✓ sandbox network: no connection out from inside the sandbox: 127.0.0.1:40157 ...
    ✓ command caps: each command runs in a group of its own in the cgroup v1 memory ...
    ✓ slirp4netns: /usr/bin/slirp4netns, for commands a policy rule grants a network
    ✓ ray: the cluster at ray-head:6379 answers: 2 nodes alive
    ✓ sandbox on ray node 10.0.0.7: bubblewrap /usr/bin/bwrap confines commands (own ...
    ✗ database: sqlite+aiosqlite:///x.db is at revision 0006, the newest is 0007: ...
    – slack: not configured (no SLACK_BOT_TOKEN)
    ✓ discord: the bot token works (GET /users/@me): bot user agent-bot (1198...)
    – model API: demo model (no ANTHROPIC_API_KEY set)
    ✓ workspace: /srv/threadbot/.threadbot/workspaces exists and is writable
    threadbot doctor: 1 check failed

- the sandbox: the bot's own probe (:func:`bot.sandboxing.probed`, namespaces, its
  ``/proc``, the network unshare, a canary in a process of the bot's user that
  must not be readable from inside); then, from inside, a ``python3`` socket
  connect to listeners this process opens on 127.0.0.1 and ``::1`` and to
  192.0.2.1:80 (TEST-NET-1, RFC 5737: no real host), all of which must fail, the
  public one with "Network is unreachable" (no route at all: a timeout would mean
  packets left the sandbox); whether slirp4netns is there (needed only when a
  policy rule grants a network). A missing or unusable bubblewrap is a failure
  that says what to do (install it; the container options);
- the command caps: where each command gets a cgroup of its own, with its memory
  and process caps (:func:`bot.sandboxing.command_groups`); nowhere is a failure
  (every command asks a person first);
- with ``runner = "ray"``, the same sandbox checks on every live node of the Ray
  cluster, where the runs' commands run (a Ray task pinned to each node:
  ``NodeAffinitySchedulingStrategy``,
  https://docs.ray.io/en/latest/ray-core/scheduling/index.html), each line naming its
  node; a cluster that cannot be reached is a failure; a local cluster (no
  ``ray_address``) is this host, whose lines come first;
- the database: it opens and is at the newest migration (never upgraded here; an
  SQLite file that is not there is not created); ``memory://`` keeps nothing;
- each configured platform's credentials (:mod:`bot.doctor_calls`);
- the model API key (:mod:`bot.doctor_calls`), or the demo model;
- the workspace root: it exists or can be created, and is writable (a folder
  made to try it is removed again).

:func:`doctor` prints the lines and returns the exit code: 0 when no check failed,
1 when one did (bad settings are exit 2 before any check: :mod:`bot.commands`).
No secret is printed: every line goes through the redactor of the settings'
secrets, and a refusal is shown by the platform's error code, never the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import tempfile
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from bot.doctor_calls import Check, discord_check, failed, model_check, ok, skipped, slack_checks
from bot.doctor_sandbox import sandbox_checks
from bot.secret_files import secret_settings
from bot.settings import Settings
from core.secrets import Redactor


async def doctor(settings: Settings) -> int:
    """Run every check, print one line each and a summary; the exit code (0 or 1)."""
    checks = await diagnose(settings)
    redactor = Redactor(settings.secrets())
    for check in checks:
        print(redactor.redact(check.line()), flush=True)
    failures = sum(check.mark == "failed" for check in checks)
    if failures:
        print(f"threadbot doctor: {failures} check{'s' if failures > 1 else ''} failed")
        return 1
    print("threadbot doctor: everything needed works")
    return 0


async def diagnose(settings: Settings) -> list[Check]:
    """Every check's outcome, in the order of the module docstring (they run at once)."""
    groups = await asyncio.gather(
        _guarded("sandbox", asyncio.to_thread(sandbox_checks, settings)),
        _guarded("ray", ray_checks(settings)),
        _guarded("database", database_checks(settings.database_url)),
        _guarded("slack", slack_checks(settings)),
        _guarded("discord", discord_check(settings)),
        _guarded("model API", model_check(settings)),
        _guarded("workspace", asyncio.to_thread(workspace_checks, settings.workspace_root)),
    )
    return [check for group in groups for check in group]


async def _guarded(name: str, checks: Awaitable[list[Check]]) -> list[Check]:
    """``checks``, or one failed check saying what went wrong when the check itself broke."""
    try:
        return await checks
    except Exception as exc:
        return [failed(name, f"the check itself failed: {type(exc).__name__}: {exc}")]


# --- the Ray nodes ---------------------------------------------------------------------


NODE_WAIT = 120.0
"""Seconds the sandbox checks on the Ray nodes may take together (a node starts a worker)."""


async def ray_checks(settings: Settings) -> list[Check]:
    """With ``runner = "ray"``: the cluster answers, and :func:`sandbox_checks` on each of
    its live nodes, as a Ray task pinned there, each line naming the node. This
    process's own connection is used when it has one (else one is made for the checks
    and ended after); without ``ray_address`` the cluster is a local one the bot starts,
    on this host: skipped. The settings go to the nodes without their secrets."""
    if settings.runner != "ray":
        return []
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from bot.ray_runner import cluster_unreachable

    connected = ray.is_initialized()
    address = settings.ray_address
    if not connected and address is None:
        return [
            skipped(
                "ray",
                "no ray_address: the runs go to a local cluster the bot starts on this host, "
                "whose sandbox is checked above",
            )
        ]
    if not connected:
        assert address is not None
        why = await cluster_unreachable(address)
        if why is not None:
            return [failed("ray", f"cannot connect to the Ray cluster at {address}: {why}")]
        try:
            await asyncio.to_thread(
                ray.init, address=address, logging_level=logging.ERROR, log_to_driver=False
            )
        except Exception as exc:
            return [failed("ray", f"cannot connect to the Ray cluster at {address}: {exc}")]
    try:
        listed: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        nodes = [node for node in listed if node.get("Alive")]
        checked: Any = ray.remote(sandbox_checks)
        shipped = settings.model_copy(
            update={name: None for name in secret_settings(type(settings).model_fields)}
        )
        pinned = [
            checked.options(
                num_cpus=0,
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            ).remote(shipped)
            for node in nodes
        ]
        found = await asyncio.wait_for(asyncio.gather(*pinned), NODE_WAIT)
    finally:
        if not connected:
            await asyncio.to_thread(ray.shutdown)
    where = address or "this process's connection"
    alive = f"{len(nodes)} node{'' if len(nodes) == 1 else 's'} alive"
    checks = [ok("ray", f"the cluster at {where} answers: {alive}")]
    for node, each in zip(nodes, found, strict=True):
        name = f"on ray node {node.get('NodeManagerAddress') or node['NodeID']}"
        checks += [Check(f"{check.name} {name}", check.mark, check.said) for check in each]
    return checks


# --- the database ---------------------------------------------------------------------


async def database_checks(url: str) -> list[Check]:
    """The store at ``url`` opens and its schema is at the newest migration (read only)."""
    if url == "memory://":
        return [skipped("database", "memory:// keeps nothing past the process (tests, a try)")]
    from alembic.script import ScriptDirectory
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from conversations.store import migrate
    from conversations.store.sql import create_engine
    from conversations.store.sql.failures import database_said

    parsed = make_url(url)
    shown = parsed.render_as_string(hide_password=True)
    file = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if file and file != ":memory:":
        missing = await asyncio.to_thread(_no_sqlite_file, Path(file), shown)
        if missing is not None:
            return [missing]
    try:
        engine = create_engine(url)
    except OSError as exc:
        return [failed("database", f"{shown} does not open: {database_said(url, exc)}")]
    try:
        current = await migrate.current_revision(engine)
    except (SQLAlchemyError, OSError) as exc:
        return [failed("database", f"{shown} does not open: {database_said(url, exc)}")]
    finally:
        await engine.dispose()
    scripts = ScriptDirectory.from_config(migrate.alembic_config())
    head = scripts.get_current_head()
    if current == head:
        return [ok("database", f"{shown} opens, at the newest revision {head}")]
    if current is None:
        return [failed("database", f"{shown} has no schema yet: needs `threadbot db upgrade`")]
    if current in {script.revision for script in scripts.walk_revisions()}:
        return [
            failed(
                "database",
                f"{shown} is at revision {current}, the newest is {head}: "
                "needs `threadbot db upgrade`",
            )
        ]
    return [
        failed(
            "database",
            f"{shown} is at revision {current}, which this threadbot does not know (its "
            f"newest is {head}): a newer threadbot upgraded it; run that one",
        )
    ]


def _no_sqlite_file(file: Path, shown: str) -> Check | None:
    """None when ``file`` is there; else whether it can be made (without making it)."""
    if file.exists():
        return None
    problem = writable(file.absolute().parent)
    if problem is not None:
        return failed("database", f"{shown}: no database there, and {problem}")
    return skipped(
        "database",
        f"{shown}: no database there yet; `threadbot db upgrade` (or the first "
        "`threadbot run`) makes it",
    )


# --- the workspace root ---------------------------------------------------------------


def workspace_checks(root: Path) -> list[Check]:
    """``root`` exists (or can be made) and a file can be written in it (blocking)."""
    where = root.absolute()
    problem = writable(where)
    if problem is not None:
        return [failed("workspace", problem)]
    if not where.exists():
        return [ok("workspace", f"{where} does not exist yet; it can be made, and written to")]
    return [ok("workspace", f"{where} exists and is writable")]


def writable(folder: Path) -> str | None:
    """What keeps a file from being written in ``folder`` (made if missing), or None.

    Folders made to try it are removed again, innermost first (blocking). One try at
    a time (the database's folder and the workspace root may share folders)."""
    with _TRYING:
        return _try_writing(folder)


_TRYING = threading.Lock()


def _try_writing(folder: Path) -> str | None:
    missing: list[Path] = []  # innermost first
    existing = folder
    while not existing.exists() and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        return f"{folder}: {existing} is not a folder"
    try:
        for made in reversed(missing):
            made.mkdir()
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        return f"{folder} is not writable: {reason}"
    finally:
        for made in missing:
            with contextlib.suppress(OSError):
                made.rmdir()
    return None
