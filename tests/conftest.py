"""Shared test helpers: settings on a temporary database, an app with a scripted model."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from bot.app import App, build
from bot.settings import Settings
from core.models.scripted import ScriptedModel
from tests import postgres
from tests import ray_cluster as ray_cluster_
from tests.browser import browser  # noqa: F401  (the fixture: headless Chromium)


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings on a fresh in-memory store and workspace folder; notes are never held back.

    A module whose tests are about SQL (a restart on the same database, SQLite
    itself) overrides this fixture with :func:`sqlite_settings`.
    """
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return Settings(
        database_url="memory://",
        workspace_root=tmp_path / "workspaces",
        progress_interval=0,
        running_note_every=0,  # no "still running" note, however slow the machine
        console_user="alice",
    )


@pytest.fixture
def sqlite_settings(settings: Settings, tmp_path: Path) -> Settings:
    """The same settings on a fresh SQLite file."""
    settings.database_url = f"sqlite+aiosqlite:///{tmp_path / 'threadbot.db'}"
    return settings


@pytest.fixture
async def make_app(
    settings: Settings,
) -> AsyncIterator[Callable[[ScriptedModel], asyncio.Future[App]]]:
    """Build apps with a given model; every app built is closed at the end of the test."""
    apps: list[App] = []

    async def factory(model: ScriptedModel) -> App:
        app = await build(settings, model=model)
        apps.append(app)
        return app

    yield factory  # type: ignore[misc]
    for app in apps:
        await app.close()


async def wait_for(condition: Callable[[], object], *, seconds: float = 60.0) -> None:
    """Poll ``condition`` (sync or async) every 10 ms until truthy; fail after ``seconds``
    (far more than any condition takes: the limit holds on a machine ten times slower)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.Server]:
    """A PostgreSQL server this session may create databases on (``tests/postgres.py``
    says where it comes from); skipped with the reason where there is none (failed
    under CI)."""
    server = postgres.start()
    if isinstance(server, str):
        _missing(server)
        return
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_database(postgres_server: postgres.Server) -> Iterator[str]:
    """The URL of this session's own PostgreSQL database, at the newest migration;
    dropped at the end."""
    url, drop = postgres.session_database(postgres_server)
    try:
        yield url
    finally:
        drop()


@pytest.fixture
def empty_postgres_database(postgres_server: postgres.Server) -> Iterator[str]:
    """The URL of a new PostgreSQL database without any schema, for this test alone."""
    url, drop = postgres.empty_database(postgres_server)
    try:
        yield url
    finally:
        drop()


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """This session's PostgreSQL database, emptied for this test: its URL. (A plain
    fixture, so an async fixture may ask for it with ``request.getfixturevalue``.)"""
    postgres.run(postgres.emptied(postgres_database))
    return postgres_database


@pytest.fixture(params=["sqlite", "postgresql"])
def instances_database(request: pytest.FixtureRequest) -> str | None:
    """The store several bot processes of a test share (``tests/instances.py``): None for
    the SQLite file in ``tmp_path``, or this test's PostgreSQL database."""
    from tests.instances import database_url

    return database_url(request, request.param)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ray_cluster_.RayCluster]:
    """The session's local Ray cluster (``tests/ray_cluster.py``); skipped with the reason
    where Ray is not installed (failed under CI). Mark the tests that use it
    ``@pytest.mark.xdist_group("ray")``: one worker runs them all, on one cluster."""
    problem = ray_cluster_.missing()
    if problem is not None:
        _missing(problem)
    with ray_cluster_.local_cluster(tmp_path_factory.getbasetemp()) as cluster:
        yield cluster


@pytest.fixture
def working_bwrap(working_caps: None) -> None:
    """Bubblewrap runs here, and commands get their cgroups; skipped with the reason where
    not (failed under CI)."""
    from bot.sandboxing import probed

    sandbox, probe = probed("bwrap")
    if sandbox is None or not probe.ok:
        _missing(f"bubblewrap cannot run here: {'; '.join(probe.problems)}")


@pytest.fixture
def working_caps() -> None:
    """Each command gets a cgroup of its own here (v2, or v1 as root); skipped with the
    reason where not (failed under CI)."""
    from bot.sandboxing import command_groups

    found = command_groups()
    if isinstance(found, str):
        _missing(f"commands cannot get a cgroup here: {found}")


@pytest.fixture
def systemd_analyze() -> str:
    """The ``systemd-analyze`` binary; skipped with the reason where it is not installed
    (failed under CI)."""
    found = shutil.which("systemd-analyze")
    if found is None:
        _missing("systemd-analyze is not installed (systemd's own package): no unit verified")
    assert found is not None
    return found


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (a skip counts as a failure under CI)")
    pytest.skip(reason)
