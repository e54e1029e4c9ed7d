"""Benchmark 6: what a waiting conversation costs: heap, and approval latency with many waiting.

**Heap.** The app built by ``bot.app.build`` (temporary SQLite file, default
settings), fed through its hub with a sender that keeps nothing
(:mod:`bench._hub`), so no adapter's own maps are counted. After a warm-up of a
few conversations, in each of ``heap_rounds`` rounds ``tracemalloc`` traces
while ``heap_sample`` more are mentioned and left waiting for plan approval (20
at a time, then settled); a round's figure is the growth of traced Python memory
(after ``gc.collect()``) divided by their number, in KiB. The number of asyncio
tasks before and after each round is printed: waiting holds none. No floor: the
target is a size, bytes of Python objects, which no other process's load moves.
Target: at most the baseline of issue 12 (0.755 KiB, measured on commit
``b2a8c07``, the code before the data-path work) plus 10%, a fixed number:
judged on the median of the rounds, printed with their spread.

**Approval latency.** Two such apps, one with ``few`` (20) conversations waiting
for plan approval and one with ``many`` (2,000). One approval: Alice's ✅
reaction on a waiting plan, handed to the hub, to the answer's post reaching the
sender (the model answers at once after approval: one turn, ``finish``), in ms
(``loop.time()``). After each approval the app settles and one new conversation
is mentioned and left waiting (untimed), so the count stays the same. The figure
is the latency with ``many`` waiting; its floor the latency with ``few``.

**Rounds.** ``rounds`` rounds of ``approvals`` approvals in each app, alternating
(:func:`bench._verdict.in_turn`: ``few`` first in round 0, ``many`` first in
round 1...). A round's ratio is the p50 with ``many`` waiting over the p50 with
``few`` of the same round; the verdict is on the median of those ratios,
printed with their spread. Target (issue 12): latency that does not depend on
how many wait: with 2,000 waiting within 10% of the latency with 20, at most
1.1x its floor.
"""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench._agent import TurnModel, plan_then_finish, toolbox
from bench._hub import NullSender, approve, mention, plan_messages, threadbot_on_hub
from bench._report import Figure, Result, median
from bench._verdict import Target, in_turn

TOLERANCE = 0.10
HEAP_BASELINE_KIB = 0.755
"""Heap per waiting conversation at issue 12's baseline (commit ``b2a8c07``)."""
BATCH = 20
TIMEOUT = 120.0
WARMUP = 10


async def run(
    root: Path,
    *,
    many: int = 2000,
    few: int = 20,
    heap_sample: int = 500,
    heap_rounds: int = 3,
    approvals: int = 10,
    rounds: int = 5,
) -> Result:
    """Measure the heap of ``heap_rounds`` x ``heap_sample`` waiting conversations and
    approval latency with ``many`` and ``few`` waiting.

    Raises :class:`ValueError` when the warm-up and the heap rounds together need more
    than ``many`` waiting conversations.
    """
    started = time.perf_counter()
    traced = heap_rounds * heap_sample
    if WARMUP + traced > many:
        raise ValueError(
            f"{WARMUP} warm-up and {heap_rounds} x {heap_sample} traced conversations "
            f"are more than the {many} waiting"
        )
    async with (
        threadbot_on_hub(
            root / "many", model=TurnModel(plan_then_finish), toolbox=toolbox()
        ) as big,
        threadbot_on_hub(
            root / "few", model=TurnModel(plan_then_finish), toolbox=toolbox()
        ) as small,
    ):
        await _wait_for_approval(big[0], WARMUP)
        heaps = [await _heap(big[0], heap_sample) for _ in range(heap_rounds)]
        await _wait_for_approval(big[0], many - traced - WARMUP)
        await _wait_for_approval(small[0], few)
        apps = {
            "many": (big, root / "many" / "threadbot.db"),
            "few": (small, root / "few" / "threadbot.db"),
        }
        latencies: dict[str, list[float]] = {"many": [], "few": []}
        threads = {"many": await _threads(big[0]), "few": await _threads(small[0])}
        for number in range(rounds):
            for name in in_turn(number, "few", "many"):
                (app, sender), db = apps[name]
                one_round = []
                for _ in range(approvals):
                    thread = threads[name].pop(0)
                    one_round.append(await _approval(app, sender, db, thread))
                    threads[name].append(await _new_waiting(app))
                latencies[name].append(median(one_round))
    heap = Figure(
        key="heap_per_waiting_kib",
        label=f"Python heap per waiting conversation ({heap_sample} traced a round)",
        unit="KiB",
        rounds=[per_conversation / 1024 for per_conversation, _tasks in heaps],
        target=Target(
            HEAP_BASELINE_KIB * (1 + TOLERANCE),
            of_floor=False,
            why=f"issue 12's baseline, {HEAP_BASELINE_KIB} KiB, plus {TOLERANCE:.0%}",
        ),
        notes=[
            "asyncio tasks alive by round, before/after: "
            + ", ".join(f"{before}/{after}" for _heap, (before, after) in heaps)
        ],
    )
    latency = Figure(
        key="approval_latency_many_ms",
        label=f"approval -> answer posted, {many:,} waiting, p50",
        unit="ms",
        rounds=latencies["many"],
        floor_rounds=latencies["few"],
        floor_label=f"the same with {few} waiting",
        target=Target(1 + TOLERANCE),
    )
    return Result(
        number=6,
        title="Waiting conversations: heap each, approval latency with few and many waiting",
        sizes=(
            f"{many:,} and {few} waiting, {approvals} approvals x {rounds} rounds each; "
            f"heap {heap_rounds} x {heap_sample} traced"
        ),
        figures=[heap, latency],
        seconds=time.perf_counter() - started,
    )


async def _wait_for_approval(app: Any, count: int) -> list[str]:
    """Mention the bot ``count`` times, ``BATCH`` at a time; every plan waits for approval."""
    threads: list[str] = []
    while len(threads) < count:
        batch = min(BATCH, count - len(threads))
        threads += [await mention(app) for _ in range(batch)]
        await asyncio.wait_for(app.hub.settled(), TIMEOUT)
    return threads


async def _heap(app: Any, count: int) -> tuple[float, tuple[int, int]]:
    """Traced heap growth per conversation over ``count`` new waiting ones (bytes), and the
    number of asyncio tasks before and after."""
    gc.collect()
    tasks_before = len(asyncio.all_tasks())
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        await _wait_for_approval(app, count)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    growth = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return growth / count, (tasks_before, len(asyncio.all_tasks()))


async def _threads(app: Any) -> list[str]:
    """Threads of the conversations waiting for plan approval, oldest first."""
    waiting = await app.store.threads.active(platform="console")
    return [c.binding.thread for c in waiting if c.binding.thread]


async def _approval(app: Any, sender: NullSender, db: Path, thread: str) -> float:
    """Approve the plan waiting in ``thread``; ms until the answer reached the sender."""
    plan = plan_messages(db, [thread])[thread]
    answered = sender.answer_in(thread)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await approve(app, thread, plan)
    sent_at = await asyncio.wait_for(answered, TIMEOUT)
    await asyncio.wait_for(app.hub.settled(), TIMEOUT)
    return (sent_at - started) * 1000


async def _new_waiting(app: Any) -> str:
    """One more conversation waiting for approval (untimed); its thread."""
    thread = await mention(app)
    await asyncio.wait_for(app.hub.settled(), TIMEOUT)
    return thread
