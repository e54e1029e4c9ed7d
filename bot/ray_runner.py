"""The Ray runner: runs carried out on async actors of a Ray cluster (``runner = "ray"``).

The bot processes keep the platform connections, the inbox, the outbox's delivery and
the conversations' leases; each run goes to one of ``ray_actors`` run hosts
(:class:`bot.ray_host.RunHost`, async actors of many runs each), the one with the
fewest runs of this process going (a host found lost lately last), and stays there
until it ends (its workspace and its sandbox are on that host's node). The run's
items come back as a Ray streaming generator
(https://docs.ray.io/en/latest/ray-core/ray-generator.html); its commits go from the
actor to the store (PostgreSQL), fenced by the lease this process holds, which is
passed with the request (docs/architecture.md, "Runners").

What can go wrong, and what the caller sees:

- the run raised (the lease was taken over, an input journaled already, the store
  failed): that exception, as the run raised it;
- the actor or its node died (killed, out of memory, the node lost): :class:`RunnerLost`.
  The hub sends the input again (its next attempt), to another host if one is up;
  Ray restarts the dead one (``max_restarts=-1``); the run goes on from the journal, a
  call that was running marked ``unknown`` as after a restart, so no tool call runs
  twice;
- the caller leaves the stream (a stop cancels its task): the run is cancelled on
  its actor (its model call cancelled, its command killed) and the stream returns
  once it has ended there;
- the run was cancelled on its host (:meth:`RayRunner.cancel`, or the host closed):
  the stream raises :class:`asyncio.CancelledError`, as a local run's does.

The actors belong to the bot process that made them: they end with it (its runs
then resume wherever its conversations are taken over, from the journal).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Final

from adapters.said import connection_said
from bot.errors import RayUnreachable
from bot.ray_host import RunHost
from bot.settings import Settings
from conversations.store.leases import current_lease
from core.runner.protocol import RunEnded, RunItem, RunnerLost, RunRequest

log = logging.getLogger(__name__)

RUNS_PER_HOST: Final = 1000
"""Calls one host takes at once (Ray's ``max_concurrency`` of an async actor): its
runs, and the cancels and suspends that reach them meanwhile."""
LOST_AVOIDED: Final = 60.0
"""Seconds a host found lost is passed over while another is up (Ray restarts it)."""
CONNECT_WAIT: Final = 5.0
"""Seconds the cluster's head may take to answer a connection at the start."""
CLOSE_WAIT: Final = 10.0
"""Seconds :meth:`RayRunner.close` lets each host cancel its runs and close its store."""
LOST_POLL: Final = 1.0
"""Seconds between two looks at a host whose stream was lost (:func:`_ended_there`)."""
LOST_WAIT: Final = 300.0
"""Seconds a run lost with an unreachable host waits for it before it is sent again."""
_PATHS: Final = ("workspace_root", "workflows_folder", "model_script", "cgroup_root")
"""Settings that are paths: made absolute for the hosts, whose working folder is Ray's."""


class RayRunner:
    """Carries out runs on the run hosts ``hosts`` (Ray actor handles of
    :class:`bot.ray_host.RunHost`): :class:`core.runner.protocol.Runner`. Made by
    :meth:`start`; ``owns_ray``: this process started its Ray connection, and
    :meth:`close` ends it."""

    def __init__(self, hosts: Sequence[Any], *, owns_ray: bool = False) -> None:
        self._hosts = list(hosts)
        self._load = [0] * len(self._hosts)
        self._lost_at = [float("-inf")] * len(self._hosts)
        self._where: dict[str, int] = {}
        """Run id -> index of the host it runs on."""
        self._owns_ray = owns_ray
        self.placed = [0] * len(self._hosts)
        """Runs sent to each host since the start, in the hosts' order."""
        self.lost = 0
        """Runs whose host was lost, since the start."""

    @classmethod
    async def start(cls, settings: Settings) -> RayRunner:
        """Connect to Ray (``ray_address``; none: start a local cluster) unless this
        process is connected already, start ``ray_actors`` hosts with ``settings`` and
        wait until each has opened its store and built its engine. Raises
        :class:`bot.errors.RayUnreachable` when nothing answers at ``ray_address`` (else
        Ray would wait for it without end), and what a host raised building them (a
        database it cannot reach, a bad workflow file)."""
        import ray

        owns = not ray.is_initialized()
        if owns:
            address = settings.ray_address
            why = await cluster_unreachable(address)
            if why is not None:
                assert address is not None
                raise RayUnreachable(address, why)
            try:
                await asyncio.to_thread(ray.init, address=address)
            except ConnectionError as exc:  # "auto" with no cluster running on this machine
                why = "no Ray cluster runs on this machine (Ray: could not find one)"
                raise RayUnreachable(address or "auto", why) from exc
        made: Any = ray.remote(RunHost).options(
            num_cpus=0,  # runs wait on the model and on commands, not on a CPU of Ray's
            scheduling_strategy="SPREAD",  # the hosts over the nodes, not all on one
            max_concurrency=RUNS_PER_HOST,
            max_restarts=-1,
            max_task_retries=0,  # a run lost with its actor is sent again by the hub
        )
        shipped = hosts_settings(settings)
        hosts = [made.remote(shipped) for _ in range(settings.ray_actors)]
        try:
            where = await asyncio.gather(*(host.ready.remote() for host in hosts))
        except BaseException:
            for host in hosts:
                ray.kill(host, no_restart=True)
            if owns:
                await asyncio.to_thread(ray.shutdown)
            raise
        log.info("runs go to %d Ray actors: %s", len(hosts), where)
        return cls(hosts, owns_ray=owns)

    async def run(self, request: RunRequest) -> AsyncIterator[RunItem]:
        """Carry out ``request`` on a host (see the module docstring); the lease this
        task holds on the conversation goes with it."""
        from ray.exceptions import RayError, RayTaskError

        index = self._pick()
        host = self._hosts[index]
        lease = current_lease(request.conversation_id)
        shipped = request.model_copy(update={"snapshot": None})  # a hint for this process only
        self._load[index] += 1
        self.placed[index] += 1
        self._where[request.run_id] = index
        settled = False
        try:
            stream = host.run.options(num_returns="streaming").remote(shipped, lease)
            try:
                async for ref in stream:
                    item: RunItem = await ref
                    settled = isinstance(item, RunEnded)
                    yield item
            except RayTaskError as exc:
                settled = True
                cause = exc.cause
                raise (cause if isinstance(cause, Exception) else exc) from exc
            except RayError as exc:
                settled = True
                self._lost_at[index] = time.monotonic()
                self.lost += 1
                await _ended_there(host, request.run_id)
                raise RunnerLost(
                    f"the Ray actor of run {request.run_id} was lost: {type(exc).__name__}"
                ) from exc
            if not settled:  # ended without its end: cancelled there (cancel, a host closed)
                settled = True
                raise asyncio.CancelledError(f"run {request.run_id} was cancelled on its host")
        finally:
            try:
                if not settled:  # left early (a stop): the run ends there first
                    await asyncio.shield(_cancelled(host, request.run_id))
            finally:
                self._load[index] -= 1
                self._where.pop(request.run_id, None)

    def _pick(self) -> int:
        """The host for a new run: one not lost lately, then the fewest runs, then the first."""
        lately = time.monotonic() - LOST_AVOIDED
        return min(
            range(len(self._hosts)),
            key=lambda i: (self._lost_at[i] > lately, self._load[i], i),
        )

    async def cancel(self, run_id: str) -> bool:
        """Cancel the run ``run_id`` on its host and return once it has ended there;
        False when it does not run (its host lost: it ended with it)."""
        index = self._where.get(run_id)
        if index is None:
            return False
        return await _cancelled(self._hosts[index], run_id)

    async def suspend(self) -> None:
        """Every host starts no new step in its runs (this process shuts down)."""
        from ray.exceptions import RayError

        for host in self._hosts:
            with contextlib.suppress(RayError):
                await host.suspend.remote()

    async def running(self) -> list[list[str]]:
        """The run ids going on at each host, in the hosts' order (what the actors say)."""
        return list(await asyncio.gather(*(host.running.remote() for host in self._hosts)))

    @property
    def hosts(self) -> list[Any]:
        """The Ray actor handles of the hosts, in order."""
        return list(self._hosts)

    async def close(self) -> None:
        """End the hosts (their runs cancelled, their stores closed, at most
        :data:`CLOSE_WAIT` seconds each) and, when this process started it, its Ray
        connection (a local cluster stops with it)."""
        import ray
        from ray.exceptions import RayError

        for host in self._hosts:
            with contextlib.suppress(RayError, TimeoutError):
                await asyncio.wait_for(host.close.remote(), CLOSE_WAIT)
            ray.kill(host, no_restart=True)
        if self._owns_ray:
            await asyncio.to_thread(ray.shutdown)


async def cluster_unreachable(address: str | None) -> str | None:
    """Why nothing answers a TCP connection at ``address`` (``host:port``, the cluster's
    head), in words; None when something does, or ``address`` is not a ``host:port``
    (None: a local cluster; ``auto``; a ``ray://`` client address): Ray is asked then."""
    if address is None:
        return None
    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit():
        return None
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port)), CONNECT_WAIT
        )
    except OSError as exc:  # TimeoutError too
        return connection_said(exc)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


async def _cancelled(host: Any, run_id: str) -> bool:
    """Ask ``host`` to cancel ``run_id`` and wait for its end; False when the host is lost."""
    from ray.exceptions import RayError

    try:
        return bool(await host.cancel.remote(run_id))
    except RayError as exc:
        log.warning("could not cancel run %s on its Ray actor (%s): it is gone", run_id, exc)
        return False


async def _ended_there(host: Any, run_id: str) -> None:
    """Return once ``run_id`` is surely not running on ``host`` any more, after its
    stream was lost: the host answers (it is the same process, reached again, which
    cancels the run and waits for its end, or one Ray restarted, without it) or is dead
    for good. Ray says an actor it is restarting, or cannot reach for a while, is
    unavailable: asked again every :data:`LOST_POLL` seconds, at most :data:`LOST_WAIT`."""
    from ray.exceptions import ActorUnavailableError, RayError

    deadline = time.monotonic() + LOST_WAIT
    while True:
        try:
            await host.cancel.remote(run_id)
            return
        except ActorUnavailableError:
            if time.monotonic() > deadline:
                log.warning("run %s: its Ray actor stayed unreachable; sent again", run_id)
                return
            await asyncio.sleep(LOST_POLL)
        except RayError:
            return  # dead for good: the run ended with it


def hosts_settings(settings: Settings) -> Settings:
    """``settings`` as the hosts take them: their paths absolute (a host's working folder
    is one of Ray's; ``workspace_root`` must be the same folder on every node)."""
    update = {
        name: value.resolve()
        for name in _PATHS
        if isinstance(value := getattr(settings, name), Path)
    }
    return settings.model_copy(update=update)
