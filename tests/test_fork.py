"""Rewind and fork (issue 34): a new thread that holds the journal up to a chosen entry.

The real Anthropic model against the local Messages API fake, in-process on SQLite
(and the core rule on the in-memory store): a console conversation looks around,
proposes a plan, is approved, writes a file, reads it back and finishes. An operator
then forks it at an entry of its journal (:class:`conversations.forks.Forker`, what
``threadbot fork`` and the inspector's "fork here" call) and the tests read what the
fake received: the fork's first request holds exactly the journal up to that entry,
as the original's request made right after it did, and after it the fork's note, the
last block of the last user message (``[threadbot: fork] ...``: a
:class:`~core.vocabulary.entries.ContextNote`, placed as people's words are, after
the tool results), which tells the model its files are not as they were. The
original is untouched: its journal, records, requests and outbox rows read the same
before and after (docs/architecture.md, "Rewind and fork").
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from bot.app import App
from bot.forking import forker_for
from bot.settings import Settings
from conversations.forks import Fork, Forker, ForkRefused
from conversations.store.interfaces import Store
from core.run.fork import FORK_NOTE, fork_note
from core.vocabulary.entries import (
    AssistantTurn,
    ContextNote,
    DecisionEntry,
    ForkedFrom,
    ToolResultEntry,
    UserText,
)
from core.vocabulary.lifecycle import Lifecycle
from core.vocabulary.requests import PlanApproval, RequestState
from core.vocabulary.snapshot import ConversationSnapshot
from core.vocabulary.tool_records import ToolState
from tests.check_repo import git
from tests.conftest import wait_for
from tests.fakes.anthropic_server import FakeAnthropicServer, text, tool_use
from tests.harness import Chat
from tests.test_cache_prefix import running, unmarked

ORIGINAL = [
    [text("Looking first."), tool_use("toolu_01", "list_files", {})],
    [tool_use("toolu_02", "propose_plan", {"steps": ["Write the notes", "Read them back"]})],
    [tool_use("toolu_03", "write_file", {"path": "notes.md", "content": "draft\n"})],
    [tool_use("toolu_04", "read_file", {"path": "notes.md"})],
    [tool_use("toolu_05", "finish", {"answer": "Notes written."})],
]
"""The original run: five requests (the plan approved between the second and third)."""


def note_block(at: int) -> dict[str, Any]:
    """The fork's note as the model reads it (the channel names no repository)."""
    return {"type": "text", "text": f"[threadbot: fork] {fork_note('dana', at, cloned=False)}"}


def has_notes(workspace: str) -> bool:
    """Whether the file the original wrote is in ``workspace``."""
    return Path(workspace, "notes.md").exists()


def seq_of(snap: ConversationSnapshot, kind: type, **fields: Any) -> int:
    """The ``seq`` of the first entry of ``kind`` whose attributes are ``fields``."""
    return next(
        r.seq
        for r in snap.journal
        if isinstance(r.entry, kind) and all(getattr(r.entry, k) == v for k, v in fields.items())
    )


async def what_is_kept(store: Store, snap: ConversationSnapshot) -> tuple[Any, ...]:
    """Everything the store holds of a conversation: snapshot and outbox rows."""
    rows = await store.outbox.rows(snap.id)
    return (await store.journal.load(snap.id), [(r.id, r.state, r.action) for r in rows])


async def the_original(app: App) -> tuple[Chat, ConversationSnapshot]:
    """The original conversation, run to its end (plan approved with a reaction)."""
    chat = Chat(app)
    await chat.mention("write notes and read them back")
    await chat.react(chat.bot_message("📋 Plan (v1)"))
    await app.hub.settled()
    snap = await chat.snapshot()
    assert snap.status.lifecycle is Lifecycle.DONE
    return chat, snap


async def forked(app: App, chat: Chat, made: Fork) -> ConversationSnapshot:
    """The fork once its thread started and its run stopped (done or waiting)."""
    await wait_for(lambda: "🍴 Forked by operator dana" in chat.out.getvalue())
    await app.hub.settled()
    snap = await app.store.journal.load(made.conversation_id)
    conversation = await app.store.threads.info(made.conversation_id)
    assert conversation.binding.thread and conversation.binding.thread.isdigit()  # its thread
    return snap


@pytest.fixture(params=["sqlite", "memory"])
def each_store(request: pytest.FixtureRequest) -> Settings:
    """The settings on a SQLite file, then on the in-memory store."""
    name = "sqlite_settings" if request.param == "sqlite" else "settings"
    settings: Settings = request.getfixturevalue(name)
    return settings


async def test_a_fork_starts_a_new_thread_whose_first_request_holds_the_journal_up_to_there(
    each_store: Settings,
) -> None:
    sqlite_settings = each_store
    script = [*ORIGINAL, [tool_use("toolu_06", "finish", {"answer": "Forked and done."})]]
    async with FakeAnthropicServer(script) as server, running(sqlite_settings, server) as app:
        chat, original = await the_original(app)
        at = seq_of(original, ToolResultEntry, tool_use_id="toolu_03")  # the file written
        kept_before = await what_is_kept(app.store, original)
        forker = Forker(store=app.store, workspace_root=sqlite_settings.workspace_root)

        made = await forker.fork(original.id, at, operator="dana")
        fork = await forked(app, chat, made)

        assert len(server.requests) == 6
        after_at, first = server.requests[3].body, server.requests[5].body
        expected = copy.deepcopy(unmarked(after_at["messages"]))
        expected[-1]["content"].append(note_block(at))
        assert unmarked(first["messages"]) == expected
        assert unmarked(first["system"]) == unmarked(after_at["system"])
        assert unmarked(first["tools"]) == unmarked(after_at["tools"])
        assert await what_is_kept(app.store, original) == kept_before  # the original, untouched

    # The fork holds entries 1..at as they were, then its note, then its own run.
    assert [r.entry for r in fork.journal[:at]] == [
        _renamed(r.entry, original, fork) for r in original.journal[:at]
    ]
    assert [r.at for r in fork.journal[:at]] == [r.at for r in original.journal[:at]]
    came = fork.journal[at].entry  # where it came from, which the model does not read
    assert came == ForkedFrom(conversation=original.id, at=at, by="dana")
    note = fork.journal[at + 1].entry
    assert isinstance(note, ContextNote) and note.strategy == FORK_NOTE
    assert fork.status.lifecycle is Lifecycle.DONE and fork.position == "answered"
    assert fork.requester == original.requester
    assert fork.workspace != original.workspace and not has_notes(fork.workspace)
    # The approved plan came with it, under a new id, and the records of the calls made.
    (plan,) = fork.requests
    assert isinstance(plan, PlanApproval) and plan.state is RequestState.DECIDED
    assert plan.id not in {r.id for r in original.requests}
    assert fork.plan_version == 1
    assert {i: r.state for i, r in fork.tool_calls.items()} == {
        "toolu_01": ToolState.DONE,
        "toolu_02": ToolState.DONE,
        "toolu_03": ToolState.DONE,
        "toolu_06": ToolState.DONE,
    }
    said = chat.said()
    header = (
        f"🍴 Forked by operator dana from thread {chat.thread} of console at entry {at} of "
        f"its journal (conversation {original.id}); it goes on from there."
    )
    assert said.count(header) == 1
    assert said[-1].startswith("✅ Forked and done.")
    (row,) = [e for e in await app.store.audit.entries() if e.request_kind == "fork"]
    assert (row.conversation_id, row.request_id, row.user_id) == (
        original.id,
        str(at),
        "operator:dana",
    )
    assert (row.means, row.outcome) == ("command", "forked")
    assert made.conversation_id in row.reason


def _renamed(entry: Any, original: ConversationSnapshot, fork: ConversationSnapshot) -> Any:
    """``entry`` as the fork holds it: a decision names the fork's copy of its request."""
    if isinstance(entry, DecisionEntry):
        (copy_of,) = fork.requests
        return entry.model_copy(update={"request_id": copy_of.id})
    return entry


async def test_a_fork_between_a_tool_use_and_its_result_cancels_that_call(
    sqlite_settings: Settings,
) -> None:
    script = [*ORIGINAL, [tool_use("toolu_04", "finish", {"answer": "Not written, then."})]]
    async with FakeAnthropicServer(script) as server, running(sqlite_settings, server) as app:
        chat, original = await the_original(app)
        at = next(  # the turn that asked for write_file, before its result
            r.seq
            for r in original.journal
            if isinstance(r.entry, AssistantTurn)
            and any(c.id == "toolu_03" for c in r.entry.tool_calls)
        )
        made = await Forker(store=app.store, workspace_root=sqlite_settings.workspace_root).fork(
            original.id, at, operator="dana"
        )
        fork = await forked(app, chat, made)
        before, first = server.requests[2].body, server.requests[5].body

    cancelled = fork.tool_calls["toolu_03"]
    assert cancelled.state is ToolState.CANCELLED and made.cancelled == 1
    result = fork.journal[at + 1].entry  # after the ForkedFrom entry
    assert isinstance(result, ToolResultEntry) and result.is_error
    assert result.content.startswith("Cancelled: operator dana forked the conversation")
    # The request before the turn, then the turn, then its cancelled result and the note.
    sent = unmarked(first["messages"])
    assert sent[: len(before["messages"])] == unmarked(before["messages"])
    assert sent[len(before["messages"])] == unmarked(server.requests[3].body["messages"])[-2]
    assert sent[-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_03",
                "content": result.content,
                "is_error": True,
            },
            note_block(at),
        ],
    }
    assert len(sent) == len(before["messages"]) + 2


async def test_a_fork_at_a_plan_waiting_for_approval_cancels_it_and_the_model_plans_again(
    sqlite_settings: Settings,
) -> None:
    again = [tool_use("toolu_03", "propose_plan", {"steps": ["Write the notes again"]})]
    async with FakeAnthropicServer([*ORIGINAL, again]) as server:
        async with running(sqlite_settings, server) as app:
            chat, original = await the_original(app)
            plan_turn = next(
                r.seq
                for r in original.journal
                if isinstance(r.entry, AssistantTurn)
                and any(c.id == "toolu_02" for c in r.entry.tool_calls)
            )
            at = plan_turn + 1  # the approval step entered: the plan waits for a person
            assert original.journal[at - 1].entry.kind == "step_entered"
            forker = Forker(store=app.store, workspace_root=sqlite_settings.workspace_root)
            made = await forker.fork(original.id, at, operator="dana")
            fork = await forked(app, chat, made)
            first = server.requests[5].body

    assert fork.tool_calls["toolu_02"].state is ToolState.CANCELLED
    assert fork.requests[-1].state is RequestState.OPEN  # its own plan, v1 again
    assert isinstance(fork.requests[-1], PlanApproval) and fork.requests[-1].plan_version == 1
    assert str(fork.status) == "waiting(plan_approval)"
    assert first["messages"][-1]["content"][0]["tool_use_id"] == "toolu_02"
    assert "Plan (v1)" in chat.said()[-1]


@pytest.mark.parametrize("at", [0, -3, 10_000])
async def test_a_fork_point_outside_the_journal_or_an_unknown_conversation_is_refused(
    settings: Settings, at: int
) -> None:
    async with FakeAnthropicServer(ORIGINAL) as server, running(settings, server) as app:
        _chat, original = await the_original(app)
        forker = Forker(store=app.store, workspace_root=settings.workspace_root)
        before = await app.store.threads.conversations()
        with pytest.raises(ForkRefused, match=f"has no journal entry {at}: its journal runs 1 to"):
            await forker.fork(original.id, at, operator="dana")
        with pytest.raises(ForkRefused, match="there is no conversation nope"):
            await forker.fork("nope", 1, operator="dana")
        assert await app.store.threads.conversations() == before
        (refused,) = [e for e in await app.store.audit.entries() if e.request_kind == "fork"]
        assert (refused.conversation_id, refused.request_id, refused.outcome) == (
            original.id,
            str(at),
            "refused",
        )  # the unknown conversation has no row: there is none to record it on


async def test_a_fork_in_a_channel_with_a_repository_works_in_a_fresh_clone(
    sqlite_settings: Settings, tmp_path: Path
) -> None:
    repo = tmp_path / "operator-repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "README.md").write_text("# app\n")
    git("add", "-A", cwd=repo)
    git("-c", "user.email=op@example.com", "-c", "user.name=op", "commit", "-qm", "init", cwd=repo)
    sqlite_settings.git_repo = str(repo)
    script = [
        *ORIGINAL,
        [tool_use("toolu_06", "read_file", {"path": "notes.md"})],  # gone in the clone
        [tool_use("toolu_07", "finish", {"answer": "Forked and done."})],
    ]
    async with FakeAnthropicServer(script) as server, running(sqlite_settings, server) as app:
        chat, original = await the_original(app)
        assert has_notes(original.workspace)
        at = seq_of(original, ToolResultEntry, tool_use_id="toolu_04")  # notes read back
        made = await forker_for(sqlite_settings, app.store).fork(original.id, at, operator="dana")
        fork = await forked(app, chat, made)
        first = server.requests[5].body

    told = fork_note("dana", at, cloned=True)
    assert "a fresh clone of the channel's repository" in told
    assert unmarked(first["messages"])[-1]["content"][-1] == {
        "type": "text",
        "text": f"[threadbot: fork] {told}",
    }
    # a clone of the repository on the fork's own branch, without what the original wrote
    workspace = Path(fork.workspace)
    assert workspace != Path(original.workspace)
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=workspace) == f"threadbot/{fork.id}"
    assert (workspace / "README.md").read_text() == "# app\n"
    assert not has_notes(fork.workspace)
    assert has_notes(original.workspace)  # the original's files stay as they were
    assert fork.tool_calls["toolu_06"].state is ToolState.FAILED  # notes.md: not there


async def test_a_fork_runs_commands_in_the_sandbox_under_the_default_relative_workspace_root(
    working_bwrap: None, settings: Settings, tmp_path: Path
) -> None:
    # the defaults' workspace root is relative (``.threadbot/workspaces``); the
    # ``settings`` fixture runs the test in ``tmp_path``, as a bot runs in its folder
    relative = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'threadbot.db'}",
        workspace_root=Path(".threadbot/workspaces"),
        progress_interval=0,
        running_note_every=0,
        console_user="alice",
    )
    script = [
        *ORIGINAL,
        [tool_use("toolu_06", "run_command", {"command": "echo ran in the fork"})],
        [tool_use("toolu_07", "finish", {"answer": "Forked and ran."})],
    ]
    async with FakeAnthropicServer(script) as server, running(relative, server) as app:
        chat, original = await the_original(app)
        at = seq_of(original, ToolResultEntry, tool_use_id="toolu_03")
        made = await forker_for(relative, app.store).fork(original.id, at, operator="dana")
        fork = await forked(app, chat, made)

    (result,) = [
        r.entry
        for r in fork.journal
        if isinstance(r.entry, ToolResultEntry) and r.entry.tool_use_id == "toolu_06"
    ]
    assert "ran in the fork" in result.content and not result.is_error, result.content
    assert fork.tool_calls["toolu_06"].state is ToolState.DONE
    workspace = Path(fork.workspace)
    assert workspace.is_absolute() and workspace.parent == tmp_path / ".threadbot/workspaces"
    assert chat.said()[-1].startswith("✅ Forked and ran.")


async def test_a_point_before_the_first_request_or_after_the_run_ended_is_refused_and_audited(
    settings: Settings,
) -> None:
    async with FakeAnthropicServer(ORIGINAL) as server, running(settings, server) as app:
        _chat, original = await the_original(app)
        forker = Forker(store=app.store, workspace_root=settings.workspace_root)
        before = await app.store.threads.conversations()
        first = seq_of(original, UserText, role="request")
        assert first > 1  # the workflow chosen and its first state come before it
        answered = seq_of(original, ToolResultEntry, tool_use_id="toolu_05")  # finish's
        refusals = {
            1: f"entry 1 of conversation {original.id} comes before its first request "
            f"(entry {first}): there is nothing to go on from; fork at its first request "
            "or later",
            original.last_seq: f"it had ended at entry {original.last_seq} (done): fork at "
            "an earlier entry",
            answered: f"it had ended at entry {answered} (done): fork at an earlier entry",
        }
        for at, why in refusals.items():
            with pytest.raises(ForkRefused) as refused:
                await forker.fork(original.id, at, operator="dana")
            assert str(refused.value) == why
        assert await app.store.threads.conversations() == before  # nothing forked
        rows = [e for e in await app.store.audit.entries() if e.request_kind == "fork"]
        assert [
            (r.conversation_id, r.request_id, r.user_id, r.outcome, r.reason) for r in rows
        ] == [
            (original.id, str(at), "operator:dana", "refused", why) for at, why in refusals.items()
        ]


async def test_a_point_after_a_stop_is_refused_and_one_before_it_goes_on(
    sqlite_settings: Settings,
) -> None:
    script = [
        [tool_use("toolu_01", "propose_plan", {"steps": ["Look"]})],
        [tool_use("toolu_02", "propose_plan", {"steps": ["Look again"]})],  # the fork's
    ]
    async with FakeAnthropicServer(script) as server, running(sqlite_settings, server) as app:
        chat = Chat(app)
        await chat.mention("look around")
        await chat.stop()
        await app.hub.settled()
        original = await chat.snapshot()
        assert original.status.lifecycle is Lifecycle.CANCELLED
        forker = Forker(store=app.store, workspace_root=sqlite_settings.workspace_root)
        with pytest.raises(ForkRefused, match=r"it had ended at entry \d+ \(cancelled\)"):
            await forker.fork(original.id, original.last_seq, operator="dana")
        plan = next(r.seq for r in original.journal if isinstance(r.entry, AssistantTurn))
        made = await forker.fork(original.id, plan, operator="dana")  # before the stop
        fork = await forked(app, chat, made)

    assert str(fork.status) == "waiting(plan_approval)"
    assert fork.tool_calls["toolu_01"].state is ToolState.CANCELLED
