"""The tool policy at one place, from the ``[policy]`` tables of its settings layers.

The bot's ``[policy]`` replaces the shipped defaults freely. Each nearer layer's table
(a workspace or guild, then a channel) is applied after, under the rule of
:mod:`bot.loosening`:

- its ``deny`` and ``ask`` rules always count (tightenings);
- its ``allow`` rules (``allow_rules``) only where a wider layer lets it loosen them;
- an ``ask_commands`` that keeps every pattern in force adds its new ones, as that
  layer's asks (they ask before any allow rule, :attr:`core.policy.rules.RuleLayer.ask_commands`);
  one that drops a pattern replaces the list only where the layer may loosen it;
- ``mutating_needs_plan = true`` over an ungated wider layer gates there
  (:attr:`core.policy.rules.RuleLayer.mutating_needs_plan`); ``false`` over a gated one
  lifts the gate only where the layer may loosen it.

What is refused is recorded in a :class:`bot.loosening.Refusals`; the wider value holds.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from bot.loosening import Grants, Refusals, Step, looser
from core.policy.policy import DEFAULT_ASK_COMMANDS, Permission, Rule, RuleLayer, ToolPolicy


@dataclass(frozen=True)
class PlacePolicy:
    """The policy at a place: ``policy`` (the bot's, with the nearer layers' accepted
    rules, asks and gates), ``sources`` (the layer of ``ask_commands`` and
    ``mutating_needs_plan``, by name) and ``added`` (the asks nearer layers added)."""

    policy: ToolPolicy
    sources: Mapping[str, str]
    added: tuple[str, ...] = ()

    def ask_commands_shown(self) -> str:
        """``the default list``, ``['rm -rf']``, ``the default list + ['make deploy']``."""
        shown = _asks_shown(self.policy.ask_commands)
        return f"{shown} + {list(self.added)!r}" if self.added else shown


@dataclass
class _Walk:
    """The policy's state while the layers are applied, widest first."""

    asks: tuple[str, ...]
    gate: bool
    sources: dict[str, str]
    added: dict[str, tuple[str, ...]]
    gated: set[str]

    def asks_in_force(self) -> tuple[str, ...]:
        more = (p for extra in self.added.values() for p in extra if p not in self.asks)
        return tuple(dict.fromkeys((*self.asks, *more)))


def policy_at(
    bot_policy: ToolPolicy,
    steps: Sequence[Step],
    *,
    bot_source: str,
    grants: Grants,
    refusals: Refusals,
    mutating_tools: bool,
    known_tools: Collection[str] | None = None,
) -> PlacePolicy:
    """The policy at the place ``steps`` lead to (widest first), recording refusals.

    ``bot_source``: the label of the bot's ``[policy]`` (``bot settings
    (threadbot.toml)``); the keys it did not set come from ``defaults``.
    """
    walk = _Walk(
        asks=bot_policy.ask_commands,
        gate=bot_policy.mutating_needs_plan,
        sources={
            key: bot_source if key in bot_policy.model_fields_set else "defaults"
            for key in ("ask_commands", "mutating_needs_plan")
        },
        added={},
        gated=set(),
    )
    kept: list[tuple[str, tuple[Rule, ...]]] = []
    for step in steps:
        if step.layer.policy is None:
            continue
        own = ToolPolicy.from_toml_table(step.layer.policy, known_tools)
        kept.append((step.label, _rules(own.rules, step, grants, refusals)))
        if "ask_commands" in step.layer.policy:
            _ask_commands(walk, own.ask_commands, step, grants, refusals, bot_policy)
        if "mutating_needs_plan" in step.layer.policy:
            _plan_gate(walk, own.mutating_needs_plan, step, grants, refusals, bot_policy)
    layers = [
        RuleLayer(
            name=label,
            rules=rules,
            ask_commands=walk.added.get(label, ()),
            mutating_needs_plan=label in walk.gated,
        )
        for label, rules in reversed(kept)  # nearest first
    ]
    base = bot_policy.model_copy(
        update={"ask_commands": walk.asks, "mutating_needs_plan": walk.gate}
    )
    added = tuple(p for p in walk.asks_in_force() if p not in walk.asks)
    return PlacePolicy(
        policy=base.with_layers(layers, mutating_tools=mutating_tools),
        sources=walk.sources,
        added=added,
    )


def _rules(
    rules: Sequence[Rule], step: Step, grants: Grants, refusals: Refusals
) -> tuple[Rule, ...]:
    """A layer's rules without the allow rules it may not set."""
    kept = []
    for rule in rules:
        if rule.decision is Permission.ALLOW:
            hint = grants.refused("allow_rules", [rule], wider=[], bot=[], step=step)
            if hint is not None:
                refusals.add(
                    "allow_rules",
                    f"{step.label} sets the rule {rule.label()} (an allow rule loosens the "
                    f"policy): refused; {hint}",
                )
                continue
        kept.append(rule)
    return tuple(kept)


def _ask_commands(
    walk: _Walk,
    asks: tuple[str, ...],
    step: Step,
    grants: Grants,
    refusals: Refusals,
    bot_policy: ToolPolicy,
) -> None:
    in_force = walk.asks_in_force()
    if not looser("ask_commands", asks, in_force):
        extra = tuple(p for p in asks if p not in in_force)
        if extra:
            walk.added[step.label] = extra
        walk.sources["ask_commands"] = step.label
        return
    hint = grants.refused(
        "ask_commands", asks, wider=in_force, bot=bot_policy.ask_commands, step=step
    )
    if hint is None:
        walk.asks, walk.sources["ask_commands"] = asks, step.label
        walk.added.clear()
        return
    refusals.key(
        "ask_commands",
        step=step,
        shown=_asks_shown(asks),
        wider=_asks_shown(in_force),
        source=walk.sources["ask_commands"],
        hint=hint,
    )


def _plan_gate(
    walk: _Walk,
    needs_plan: bool,
    step: Step,
    grants: Grants,
    refusals: Refusals,
    bot_policy: ToolPolicy,
) -> None:
    in_force = walk.gate or bool(walk.gated)
    name = "mutating_needs_plan"
    hint = grants.refused(
        name, needs_plan, wider=in_force, bot=bot_policy.mutating_needs_plan, step=step
    )
    if hint is not None:
        source = walk.sources[name]
        refusals.key(name, step=step, shown="False", wider="True", source=source, hint=hint)
        return
    walk.sources[name] = step.label
    if needs_plan and not in_force:
        walk.gated.add(step.label)
    elif not needs_plan and in_force:  # a loosening the layer may make
        walk.gate = False
        walk.gated.clear()


def _asks_shown(asks: Sequence[str]) -> str:
    return "the default list" if tuple(asks) == DEFAULT_ASK_COMMANDS else repr(list(asks))
