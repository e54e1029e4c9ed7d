"""threadbot's metrics, in the Prometheus text format, for ``/metrics`` (:mod:`bot.ops`).

Each :class:`Metrics` has a registry of its own (prometheus-client's
``CollectorRegistry``), so two bots in one process (tests) never share a counter.
What is counted (docs/architecture.md, "Operating threadbot"):

- this instance's work: ``threadbot_runs_active`` (conversations with a run going or
  queued here), ``threadbot_delivery_seconds`` (a platform's time to take one
  outbound action, by platform), ``threadbot_rate_limited_total`` (HTTP 429 answers,
  by platform and API method), ``threadbot_model_calls_total`` (by model, role:
  ``planner`` or ``executor``, and outcome: ``ok``, ``error``, ``cancelled``),
  ``threadbot_model_tokens_total`` (by model and kind: ``input``, ``output``,
  ``cache_read``, ``cache_write``),
  ``threadbot_model_cost_usd_total`` (by model; priced models only) and
  ``threadbot_lease_takeovers_total`` (runs taken over from a lapsed lease);
- the database's levels, read at each scrape and the same in every instance on it
  (aggregate them with ``max``, not ``sum``): ``threadbot_runs_waiting``,
  ``threadbot_conversations_running``, ``threadbot_inbox_depth``,
  ``threadbot_outbox_depth`` and ``threadbot_outbox_oldest_seconds``;
  ``threadbot_store_up`` is 0 when the last read failed (the levels keep their last
  values then).

Metric names follow https://prometheus.io/docs/practices/naming/ (a unit suffix,
``_total`` for counters, which prometheus-client adds).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from conversations.store.health import Levels
from core.models.base import Model, ModelEvent, ModelRequest, Usage
from core.pricing import Price, priced

DELIVERY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Seconds: the bounds of ``threadbot_delivery_seconds``'s buckets (a post takes ~0.1-1 s)."""


class Metrics:
    """The metrics of one bot; :meth:`exposition` is the body of ``/metrics``.

    ``working``: conversations with a run going or queued here (``Hub.working``);
    ``takeovers``: runs taken over so far (``Hub.takeovers``).
    """

    def __init__(
        self,
        *,
        version: str,
        instance: str,
        working: Callable[[], int],
        takeovers: Callable[[], int],
    ) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        Info("threadbot_build", "The running threadbot", registry=r).info(
            {"version": version, "instance": instance}
        )
        Gauge(
            "threadbot_runs_active",
            "Conversations with a run going or queued in this instance",
            registry=r,
        ).set_function(working)
        r.register(
            _Counted("threadbot_lease_takeovers", "Runs taken over from a lapsed lease", takeovers)
        )
        self.store_up = Gauge(
            "threadbot_store_up", "1 when the last read of the levels worked", registry=r
        )
        self.waiting = Gauge(
            "threadbot_runs_waiting",
            "Conversations waiting for a person (whole database)",
            registry=r,
        )
        self.running = Gauge(
            "threadbot_conversations_running",
            "Conversations a run holds, in any instance (whole database)",
            registry=r,
        )
        self.inbox = Gauge(
            "threadbot_inbox_depth",
            "Inbound deliveries not yet handled (whole database)",
            registry=r,
        )
        self.outbox = Gauge(
            "threadbot_outbox_depth",
            "Outbox rows waiting for delivery (whole database)",
            registry=r,
        )
        self.outbox_oldest = Gauge(
            "threadbot_outbox_oldest_seconds",
            "Seconds the oldest outbox row waiting for delivery has waited (whole database)",
            registry=r,
        )
        self.delivery = Histogram(
            "threadbot_delivery_seconds",
            "Seconds a platform took to take one outbound action",
            ["platform"],
            buckets=DELIVERY_BUCKETS,
            registry=r,
        )
        self.rate_limited = Counter(
            "threadbot_rate_limited",
            "HTTP 429 answers of a platform's API",
            ["platform", "method"],
            registry=r,
        )
        self.model_calls = Counter(
            "threadbot_model_calls", "Model calls made", ["model", "role", "outcome"], registry=r
        )
        self.model_tokens = Counter(
            "threadbot_model_tokens", "Tokens of the model calls", ["model", "kind"], registry=r
        )
        self.model_cost = Counter(
            "threadbot_model_cost_usd", "Dollars of the priced model calls", ["model"], registry=r
        )

    def rate_limited_by(self, platform: str) -> Callable[[str], None]:
        """What an adapter calls with the API method of each 429 it got."""
        return lambda method: self.rate_limited.labels(platform, method).inc()

    def sent(self, platform: str, seconds: float) -> None:
        """Count one action ``platform`` took in ``seconds`` (the deliverer's ``on_sent``)."""
        self.delivery.labels(platform).observe(seconds)

    def levels_read(self, levels: Levels | None) -> None:
        """Set the database's levels (None: they could not be read; ``store_up`` 0)."""
        self.store_up.set(0 if levels is None else 1)
        if levels is None:
            return
        self.waiting.set(levels.waiting)
        self.running.set(levels.running)
        self.inbox.set(levels.inbox)
        self.outbox.set(levels.outbox)
        self.outbox_oldest.set(levels.oldest_outbox)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (prometheus-client's newest)."""
        return generate_latest(self.registry)


class _Counted(Collector):
    """A counter whose value is read from the code that counts (``count()``) at scrape."""

    def __init__(self, name: str, documentation: str, count: Callable[[], int]) -> None:
        self._name = name
        self._documentation = documentation
        self._count = count

    def collect(self) -> Iterable[Metric]:
        yield CounterMetricFamily(self._name, self._documentation, value=self._count())


class MeteredModel:
    """``model`` with its calls, tokens and cost counted in ``metrics`` (a :class:`Model`).

    ``prices``: the price entries by model (the engine's); a call of a model without one
    counts no cost.
    """

    def __init__(self, model: Model, metrics: Metrics, prices: Mapping[str, Price]) -> None:
        self._model = model
        self._metrics = metrics
        self._prices = prices
        self.name = model.name

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The events of ``model``'s answer, counted as they pass."""
        outcome = "error"
        try:
            async for event in self._model.stream(request):
                if isinstance(event, Usage):
                    self._count(event)
                yield event
            outcome = "ok"
        except (asyncio.CancelledError, GeneratorExit):
            outcome = "cancelled"
            raise
        finally:
            model = request.model or self.name
            self._metrics.model_calls.labels(model, request.role, outcome).inc()

    def _count(self, usage: Usage) -> None:
        m = self._metrics
        for kind, tokens in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_tokens),
            ("cache_write", usage.cache_write_tokens),
        ):
            m.model_tokens.labels(usage.model, kind).inc(tokens)
        found = priced(self._prices, usage.model, usage)
        if found is not None:
            m.model_cost.labels(usage.model).inc(found[1] / 1_000_000)
