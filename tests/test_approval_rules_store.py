"""Remembered approvals in the store (issue 33): the ``approvals`` contract on each backend,
``test_store_contract.py`` checking that every method is called.

A decision's rules are written with it, all or nothing, keyed by the conversation's
channel (a Discord thread's parent); a channel rule is in force for every conversation
of its channel and none elsewhere, a run rule for its run only and while that run goes
on; ``listed`` filters by place and shows the rules in force (``every``: all), and
``revoke`` takes effect at once, keeps the first revocation and refuses an unknown id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conversations.events import PlatformRef
from conversations.store import Store
from conversations.store.approvals import Place, RuleNotFound, RuleRevoked
from core.vocabulary import lifecycle
from core.vocabulary.approvals import ApprovalScope, CallPattern, Remember
from core.vocabulary.entries import UserText
from core.vocabulary.errors import RequestConflict
from core.vocabulary.journal import Change
from tests.test_store_contract import ALICE, BACKENDS, BOB, new_conversation, opened_store

PUSH = CallPattern(tool="run_command", command_prefix="git push")
EXACT = CallPattern(tool="write_file", arguments={"path": "a.md", "content": "x"})


def remember(scope: ApprovalScope, pattern: CallPattern, *, run: int = 1) -> Remember:
    return Remember(scope=scope, pattern=pattern, by=ALICE, run=run, request_id="req1")


CHANNEL_RULE = remember(ApprovalScope.CHANNEL, PUSH)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A new, empty store of each backend (as in the contract suite)."""
    async with opened_store(request.param, request, tmp_path) as new:
        yield new


async def started_run(store: Store, cid: str) -> int:
    """Begin a run in ``cid`` (its request journaled, the conversation running): its run."""
    request = UserText(author=ALICE, text="fix it", role="request")
    committed = await store.journal.commit(
        cid, Change(entries=(request,), status=lifecycle.RUNNING)
    )
    return committed.seqs[0]


async def test_a_channel_rule_is_in_force_in_its_channel_and_a_run_rule_in_its_run(
    store: Store,
) -> None:
    here = await new_conversation(store, "Ev1", thread="1.0")
    beside = await new_conversation(store, "Ev2", thread="2.0")
    elsewhere = await new_conversation(store, "Ev3", thread="3.0", channel="C2")
    run = await started_run(store, here)
    committed = await store.journal.commit(
        here, Change(remember=(CHANNEL_RULE, remember(ApprovalScope.RUN, EXACT, run=run)))
    )

    rules = await store.approvals.in_force(here, run)
    assert [(r.id, r.scope, r.pattern) for r in rules] == [
        (rules[0].id, ApprovalScope.CHANNEL, PUSH),
        (rules[1].id, ApprovalScope.RUN, EXACT),
    ]
    assert rules[0].id < rules[1].id
    assert {(r.by, r.conversation_id, r.run) for r in rules} == {(ALICE, here, run)}
    assert all(r.at == committed.at for r in rules)
    assert [r.scope for r in await store.approvals.in_force(here, run + 1)] == ["channel"]
    assert [r.pattern for r in await store.approvals.in_force(beside, 7)] == [PUSH]
    assert await store.approvals.in_force(elsewhere, run) == []
    assert await store.approvals.in_force("no-such-conversation", 1) == []


async def test_listed_filters_by_place_and_shows_a_run_rule_while_its_run_goes_on(
    store: Store,
) -> None:
    cid = await new_conversation(store)
    other = await new_conversation(store, "Ev2", thread="2.0", channel="C2")
    run = await started_run(store, cid)
    await store.journal.commit(cid, Change(remember=(remember(ApprovalScope.RUN, EXACT, run=run),)))
    await store.journal.commit(other, Change(remember=(CHANNEL_RULE,)))

    every = await store.approvals.listed()
    assert [(r.rule.scope, r.place, r.running, r.in_force) for r in every] == [
        (ApprovalScope.RUN, Place("slack", "T1", "C1"), True, True),
        (ApprovalScope.CHANNEL, Place("slack", "T1", "C2"), False, True),
    ]
    assert every[0].request_id == "req1" and every[0].revoked_at is None
    assert [r.place.channel for r in await store.approvals.listed(channel="C2")] == ["C2"]
    assert await store.approvals.listed(platform="discord") == []
    assert len(await store.approvals.listed(platform="slack", workspace="T1")) == 2

    await store.journal.commit(cid, Change(status=lifecycle.DONE))  # the run ended
    assert [r.place.channel for r in await store.approvals.listed()] == ["C2"]
    [ended] = await store.approvals.listed(channel="C1", every=True)
    assert (ended.running, ended.in_force) == (False, False)
    assert await store.approvals.in_force(cid, run + 1) == []  # the next run meets none

    again = await started_run(store, cid)  # a later run: the old rule stays ended
    assert again > run
    [still] = await store.approvals.listed(channel="C1", every=True)
    assert still.in_force is False


async def test_a_revocation_counts_at_once_and_the_first_one_is_kept(store: Store) -> None:
    cid = await new_conversation(store)
    await store.journal.commit(cid, Change(remember=(CHANNEL_RULE,)))
    [rule] = await store.approvals.in_force(cid, 1)

    revoked = await store.approvals.revoke(rule.id, by="dana")
    assert (revoked.rule.id, revoked.revoked_by, revoked.in_force) == (rule.id, "dana", False)
    assert revoked.revoked_at is not None and revoked.revoked_at >= rule.at
    assert await store.approvals.in_force(cid, 1) == []
    assert await store.approvals.listed() == []
    [kept] = await store.approvals.listed(every=True)
    assert (kept.revoked_by, kept.revoked_at) == ("dana", revoked.revoked_at)

    with pytest.raises(RuleRevoked) as second:
        await store.approvals.revoke(rule.id, by="erin")
    assert (second.value.record.revoked_by, second.value.record.revoked_at) == (
        "dana",
        revoked.revoked_at,
    )
    with pytest.raises(RuleNotFound):
        await store.approvals.revoke(rule.id + 100, by="dana")


async def test_a_discord_thread_s_rule_belongs_to_its_parent_channel(store: Store) -> None:
    def thread(channel: str) -> PlatformRef:
        return PlatformRef(
            platform="discord", workspace="111", channel=channel, thread=channel, parent="222"
        )

    first, second = [
        await store.threads.open_conversation(
            delivery_key=f"D{channel}",
            binding=thread(channel),
            requester=BOB,
            workspace_root=Path("workspaces"),
            position="planning",
        )
        for channel in ("333", "444")
    ]
    assert first is not None and second is not None
    await store.journal.commit(first, Change(remember=(CHANNEL_RULE,)))

    [rule] = await store.approvals.listed(platform="discord")
    assert rule.place == Place("discord", "111", "222")
    assert [r.pattern for r in await store.approvals.in_force(second, 1)] == [PUSH]


async def test_a_refused_commit_remembers_nothing(store: Store) -> None:
    cid = await new_conversation(store)
    with pytest.raises(RequestConflict):  # a guarded call that is not pending
        await store.journal.commit(
            cid, Change(remember=(CHANNEL_RULE,), guard_pending=("toolu_unknown",))
        )
    assert await store.approvals.listed(every=True) == []
