"""Workspaces (issue 14): each conversation its own clone, its own branch, nothing shared.

Two conversations on one repository, through the bot (sandboxed commands, the
scripted model): each gets its own clone on ``threadbot/<conversation>``; a hook
and a config command one plants never run in the other, in the operator's
repository or in the bot; the final answer names the branch and the changed
files. The sweeper removes the workspaces of conversations that ended (with their
delegations' forks), never a running or waiting one's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app import build
from conversations.events import PlatformRef
from conversations.render import render_event
from conversations.store.memory import MemoryStore
from conversations.sweeper import Sweeper
from core.models.scripted import ScriptedCall, ScriptedModel, ScriptedTurn
from core.tools.workspaces import GitWorkspaces, without_credentials
from core.vocabulary import lifecycle
from core.vocabulary.errors import ToolError
from core.vocabulary.journal import Change
from core.vocabulary.people import Person
from core.vocabulary.run_events import RunAnswered, RunStats
from tests.check_repo import git
from tests.harness import Chat

ALICE = Person(id="U0ALICE001", name="alice")
BINDING = PlatformRef(platform="slack", channel="C1", thread="1.0")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The operator's repository: one commit on main."""
    path = tmp_path / "operator-repo"
    path.mkdir()
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README.md").write_text("# app\n")
    git("add", "-A", cwd=path)
    git("-c", "user.email=op@example.com", "-c", "user.name=op", "commit", "-qm", "init", cwd=path)
    return path


def turns(command: str, answer: str) -> list[ScriptedTurn]:
    return [
        ScriptedTurn(calls=[ScriptedCall("propose_plan", {"steps": ["change the repo"]})]),
        ScriptedTurn(calls=[ScriptedCall("run_command", {"command": command})]),
        ScriptedTurn(calls=[ScriptedCall("finish", {"answer": answer})]),
    ]


COMMIT = "git -c user.email=bot@example.com -c user.name=bot commit -qm"


async def test_two_conversations_get_their_own_clones_and_branches(
    settings, repo: Path, tmp_path: Path
) -> None:
    planted = tmp_path / "planted-ran"
    plant = (
        "printf '#!/bin/sh\\ntouch hook-ran\\n' > .git/hooks/post-commit && "
        "chmod +x .git/hooks/post-commit && "
        f"git config core.fsmonitor 'touch {planted}' && "
        f"echo a > a.txt && git add a.txt && {COMMIT} a && echo b >> README.md"
    )
    in_other = f"echo b > b.txt && git add b.txt && {COMMIT} b && git checkout -q -b side"
    model = ScriptedModel([*turns(plant, "Planted."), *turns(in_other, "Committed.")])
    settings.git_repo = str(repo)
    app = await build(settings, model=model)
    async with app:
        chat = Chat(app)
        await chat.mention("change the repo, first")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        first = await chat.snapshot()
        await chat.mention("change the repo, second")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        second = await chat.snapshot()

        a, b = Path(first.workspace), Path(second.workspace)
        assert a != b
        assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=a) == f"threadbot/{first.id}"
        assert git("branch", "--list", f"threadbot/{second.id}", cwd=b)
        assert (a / "hook-ran").exists()  # the hook ran where it was planted ...
        assert not (b / "hook-ran").exists()  # ... never in the other clone
        assert not (b / ".git" / "hooks" / "post-commit").exists()
        assert not planted.exists()  # the planted fsmonitor never ran in the bot
        # The operator's repository is as it was: no hook, no branch, no config.
        assert not (repo / ".git" / "hooks" / "post-commit").exists()
        assert git("branch", "--format=%(refname:short)", cwd=repo) == "main"
        assert "fsmonitor" not in (repo / ".git" / "config").read_text()
        said = chat.out.getvalue()
        (branch_line,) = [line for line in said.splitlines() if f"threadbot/{first.id}" in line]
        assert f"🌿 `threadbot/{first.id}` · changed: `" in branch_line
        for changed in ("`README.md`", "`a.txt`", "`hook-ran`"):  # committed, or not
            assert changed in branch_line
        assert "🌿 `side` · changed: `b.txt`" in said  # the branch it ended on


async def test_a_clone_that_fails_fails_the_call_with_git_s_reason(settings, tmp_path) -> None:
    model = ScriptedModel(turns("ls", "Looked."))
    settings.git_repo = str(tmp_path / "no-such-repo")
    app = await build(settings, model=model)
    async with app:
        chat = Chat(app)
        await chat.mention("look")
        await chat.react(chat.bot_message("📋 Plan (v1)"))
        await app.hub.settled()
        snap = await chat.snapshot()
        (call,) = [r for r in snap.tool_calls.values() if r.name == "run_command"]
        assert call.state.value == "failed"
        assert "git clone failed" in chat.out.getvalue()


async def test_the_sweeper_removes_ended_workspaces_and_never_an_active_one(
    tmp_path: Path,
) -> None:
    store = MemoryStore(render=render_event)
    ids = {}
    for name in ("done", "waiting", "fresh"):
        cid = await store.threads.open_conversation(
            delivery_key=name,
            binding=PlatformRef(platform="console", channel="c", thread=name),
            requester=ALICE,
            workspace_root=tmp_path,
            position="planning",
        )
        assert cid is not None
        (tmp_path / cid).mkdir()
        (tmp_path / cid / "file").write_text(name)
        (tmp_path / f"{cid}-delegation-1").mkdir()  # a delegation's fork beside it
        ids[name] = cid
    await store.journal.commit(ids["done"], Change(status=lifecycle.DONE))
    waiting = lifecycle.waiting(lifecycle.WaitKind.QUESTION)
    await store.journal.commit(ids["waiting"], Change(status=waiting))
    now = datetime.now(UTC)
    sweeper = Sweeper(
        requests=store.requests,
        pruning=store.retention,
        engine=None,  # type: ignore[arg-type]  # no request is due
        expire=None,  # type: ignore[arg-type]
        threads=store.threads,
        workspace_retention=timedelta(days=3),
        clock=lambda: now,
    )

    assert await sweeper.remove_workspaces(now) == []  # ended just now: kept
    later = now + timedelta(days=4)
    assert await sweeper.remove_workspaces(later) == [ids["done"]]
    assert not (tmp_path / ids["done"]).exists()
    assert not (tmp_path / f"{ids['done']}-delegation-1").exists()  # its fork went with it
    assert (tmp_path / f"{ids['waiting']}-delegation-1").exists()
    assert (tmp_path / ids["waiting"] / "file").exists()
    assert (tmp_path / ids["fresh"] / "file").exists()
    assert await sweeper.remove_workspaces(later + timedelta(days=1)) == []  # once


async def test_a_token_in_the_repository_url_reaches_neither_the_clone_nor_an_error(
    tmp_path: Path, repo: Path
) -> None:
    workspaces = GitWorkspaces()
    refused = "http://x-access-token:ghp_SECRET1@127.0.0.1:9/repo.git?private_token=SECRET2"
    with pytest.raises(ToolError) as failed:
        await workspaces.prepare("c1", tmp_path / "c1", refused)
    assert "SECRET" not in str(failed.value) and "127.0.0.1:9/repo.git" in str(failed.value)

    assert without_credentials(refused) == "http://127.0.0.1:9/repo.git"
    assert without_credentials("git@github.com:org/app.git") == "git@github.com:org/app.git"
    assert without_credentials(str(repo)) == str(repo)


async def test_file_and_branch_names_cannot_end_the_code_span_or_ping() -> None:
    stats = RunStats(branch="threadbot/c1", changed_files=("x` <!channel> `y", "ok.py"))
    (row,) = render_event(BINDING, RunAnswered(text="Done.", stats=stats))
    assert "<!channel>" not in row.action.text and "`x?" in row.action.text
