"""The installs' tokens: sealed at rest, opened and redacted on every instance, keys rotated
(docs/architecture.md, "Several instances").

Two :class:`conversations.installs.Installs` on one SQLite file are two instances: the one
that stores an install redacts its token at once; another redacts it on its next look-up
of that workspace, or within its poll when it looks up nothing; an uninstall reaches it the
same way. A key rotation keeps every token readable: a new key first, ``threadbot tokens
rekey`` (the CLI, a real process), the old key dropped. The redactor learns a secret while
it runs, also in the middle of a streamed output, and :data:`core.secrets.NO_SECRETS` never
does. Settings that cannot seal are refused at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conversations.errors import Unsealable
from conversations.installs import Installs, token_name
from conversations.render import render_event
from conversations.sealing import Sealer, new_key
from conversations.store import migrate
from conversations.store.installations import Installation
from conversations.store.sql import SqlStore, create_engine
from core.secrets import NO_SECRETS, Redactor
from tests.cli_harness import threadbot
from tests.conftest import wait_for

TOKEN = "xoxb-t0second01-new-install-token-0001"
T2 = "T0SECOND01"


def install(token: str = TOKEN, team: str = T2) -> Installation:
    return Installation(
        platform="slack", enterprise="", team=team, bot_token=token, bot_user_id="U0SECBOT01"
    )


@contextlib.asynccontextmanager
async def instance(url: str, keys: list[str], poll: float = 0.05) -> AsyncIterator[Installs]:
    """One instance's installs on the database at ``url``, with its own redactor
    (``installs.redactor``)."""
    engine = create_engine(url)
    await migrate.upgrade(engine)
    store = SqlStore(engine=engine, render=render_event)
    redactor = Redactor({"SLACK_BOT_TOKEN": "xoxb-the-bots-own-token"})
    installs = Installs(
        store=store.installations,
        states=store.oauth_states,
        sealer=Sealer(keys),
        learned=redactor.add,
        poll=poll,
    )
    installs.redactor = redactor  # type: ignore[attr-defined]  # for the test to read
    try:
        yield installs
    finally:
        await store.close()


def redacts(installs: Installs, token: str = TOKEN) -> bool:
    redactor: Redactor = installs.redactor  # type: ignore[attr-defined]
    return redactor.redact(f"token={token}") == f"token=[redacted SLACK_BOT_TOKEN {T2}]"


async def test_the_instance_that_stores_an_install_redacts_its_token_at_once(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'one.db'}"
    async with instance(url, [new_key()]) as first:
        assert not redacts(first)
        stored = await first.save(install())

        assert redacts(first)
        assert stored.bot_token == TOKEN  # handed back opened
        with contextlib.closing(sqlite3.connect(tmp_path / "one.db")) as db:
            [(raw,)] = db.execute("SELECT bot_token FROM installations").fetchall()
        assert TOKEN not in raw and raw.startswith("gAAAA")  # a Fernet token


async def test_another_instance_redacts_it_at_its_next_look_up_or_within_its_poll(
    tmp_path: Path,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'shared.db'}"
    keys = [new_key()]
    async with (
        instance(url, keys) as storing,
        instance(url, keys) as looking,
        instance(url, keys) as polling,
    ):
        await looking.refresh()
        await polling.refresh()
        watching = asyncio.create_task(polling.keep_fresh())
        try:
            await storing.save(install())

            assert not redacts(looking)  # nothing told it yet
            found = await looking.find("slack", enterprise="", team=T2)
            assert found is not None and found.bot_token == TOKEN
            assert redacts(looking)  # learned before it was handed out
            await wait_for(lambda: redacts(polling))  # within its poll, looking up nothing
            assert [i.team for i in polling.known()] == [T2]

            await storing.remove("slack", enterprise="", team=T2, why="app_uninstalled")
            await wait_for(lambda: polling.known() == [])
            assert redacts(polling)  # a token once seen stays redacted
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching


async def test_a_token_sealed_with_a_key_no_longer_listed_is_refused_not_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}"
    async with instance(url, [new_key()]) as before:
        await before.save(install())
    async with instance(url, [new_key()]) as after:  # the old key is gone
        assert await after.find("slack", enterprise="", team=T2) is None
        assert await after.refresh() and after.known() == []
    said = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert said and "open with none of THREADBOT_TOKEN_KEYS" in said[0]
    assert not any(TOKEN in line for line in said)


def test_a_new_key_first_keeps_old_tokens_readable_and_reseal_retires_the_old_key() -> None:
    old, new = new_key(), new_key()
    sealed = Sealer([old]).seal(TOKEN)

    both = Sealer([new, old])
    assert both.open(sealed) == TOKEN
    resealed = both.reseal(sealed)
    assert Sealer([new]).open(resealed) == TOKEN
    with pytest.raises(Unsealable):
        Sealer([new]).open(sealed)
    with pytest.raises(ValueError, match="key 2: not a Fernet key"):
        Sealer([new, "not-a-key"])


async def test_threadbot_tokens_rekey_reseals_every_stored_token_with_the_first_key(
    tmp_path: Path,
) -> None:
    old = new_key()
    url = f"sqlite+aiosqlite:///{tmp_path / 'rekey.db'}"
    async with instance(url, [old]) as installs:
        await installs.save(install())
        await installs.save(install("xoxb-t0third001-token-0003", team="T0THIRD001"))
    new_one = threadbot(tmp_path, "tokens", "new-key")
    assert new_one.returncode == 0, new_one.stderr
    new = new_one.stdout.strip()
    assert Sealer([new]).open(Sealer([new]).seal("x")) == "x"

    env = {"THREADBOT_DATABASE_URL": url, "THREADBOT_TOKEN_KEYS": f"{new},{old}"}
    done = threadbot(tmp_path, "tokens", "rekey", env=env)

    assert done.returncode == 0, done.stderr
    assert "resealed the tokens of 2 installs" in done.stdout
    async with instance(url, [new]) as after:  # the old key dropped
        await after.refresh()
        assert sorted(i.bot_token for i in after.known()) == sorted(
            [TOKEN, "xoxb-t0third001-token-0003"]
        )
    assert new not in done.stdout + done.stderr and old not in done.stdout + done.stderr
    lost = threadbot(tmp_path, "tokens", "rekey", env=env | {"THREADBOT_TOKEN_KEYS": new_key()})
    assert lost.returncode == 1 and "nothing was changed" in lost.stderr


def test_installs_without_a_key_or_with_a_bad_one_stop_the_bot(tmp_path: Path) -> None:
    env = {"SLACK_CLIENT_ID": "1.2", "SLACK_CLIENT_SECRET": "shh-secret-value"}
    missing = threadbot(tmp_path, "run", env=env)
    assert missing.returncode == 2
    assert "SLACK_CLIENT_ID needs THREADBOT_TOKEN_KEYS" in missing.stderr
    bad = threadbot(tmp_path, "run", env=env | {"THREADBOT_TOKEN_KEYS": "too-short"})
    assert bad.returncode == 2
    assert "THREADBOT_TOKEN_KEYS: key 1: not a Fernet key" in bad.stderr
    assert "too-short" not in bad.stderr
    alone = threadbot(tmp_path, "run", env={"SLACK_CLIENT_ID": "1.2"})
    assert alone.returncode == 2 and "SLACK_CLIENT_SECRET go together" in alone.stderr


def test_the_redactor_learns_a_secret_while_it_runs_also_mid_stream() -> None:
    redactor = Redactor({"ANTHROPIC_API_KEY": "sk-ant-the-key-0001"})
    stream = redactor.stream()
    before = stream.feed("start ")  # a stream begun before the token was learned
    assert redactor.add(token_name(install()), TOKEN)
    assert not redactor.add("AGAIN", TOKEN) and not redactor.add("SHORT", "xoxb")
    out = before + stream.feed("xoxb-t0se") + stream.feed("cond01-new-install-token-0001 end")
    out += stream.finish()

    assert out == f"start [redacted SLACK_BOT_TOKEN {T2}] end"  # cut in two, held back
    assert redactor.redact(f"a {TOKEN} b") == f"a [redacted SLACK_BOT_TOKEN {T2}] b"
    with pytest.raises(TypeError):
        NO_SECRETS.add("X", TOKEN)
    assert NO_SECRETS.redact(TOKEN) == TOKEN
