"""Random agent applications for the handshake property tests.

A tree of Sequential / Parallel / Loop agents over ``ScriptAgent`` leaves. Each leaf follows a
script of steps and checks the commit-before-resume rule after every emit.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import attrs
import trio.lowlevel
from hypothesis import strategies as st

from trio_agents import (
    BaseAgent,
    Content,
    Event,
    EventActions,
    InvocationContext,
    LoopAgent,
    ParallelAgent,
    Part,
    SequentialAgent,
)


class InjectedError(Exception):
    """Raised by a ``raise`` step."""


@dataclass
class Probe:
    """What the test observes from inside the agents."""

    delivered: list[Event] = field(default_factory=list)
    running: int = 0
    started: int = 0
    violations: list[str] = field(default_factory=list)
    emitted_by: dict[str, list[int]] = field(default_factory=dict)
    sequence: dict[str, int] = field(default_factory=dict)


STEPS = ("emit", "emit", "emit", "partial", "call", "sleep", "escalate", "raise")


class ScriptAgent(BaseAgent):
    script: tuple[str, ...] = ()
    probe: Any = None

    def __repr__(self) -> str:
        return f"ScriptAgent(name={self.name!r}, script={self.script!r})"

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        probe: Probe = self.probe
        probe.running += 1
        probe.started += 1
        try:
            for index, step in enumerate(self.script):
                await self._step(ctx, probe, index, step)
        finally:
            probe.running -= 1

    async def _step(self, ctx: InvocationContext, probe: Probe, index: int, step: str) -> None:
        key = f"{self.name}_{index}"
        if step == "sleep":
            await trio.lowlevel.checkpoint()
        elif step == "raise":
            raise InjectedError(f"{self.name} failed at step {index}")
        elif step == "partial":
            await self._emit(ctx, probe, Event(partial=True, actions=_delta({"p_" + key: index})))
        elif step == "call":
            call = Part.from_function_call("tool", {"i": index}, id=f"call-{key}")
            await self._emit(ctx, probe, Event(content=Content(role="model", parts=[call])))
            await trio.lowlevel.checkpoint()
            answer = Part.from_function_response("tool", {"ok": index}, id=f"call-{key}")
            await self._emit(ctx, probe, Event(content=Content(role="user", parts=[answer])))
        else:
            actions = EventActions(state_delta={key: index}, escalate=step == "escalate" or None)
            await self._emit(ctx, probe, Event(actions=actions))

    async def _emit(self, ctx: InvocationContext, probe: Probe, event: Event) -> None:
        seq = probe.sequence[self.name] = probe.sequence.get(self.name, 0) + 1
        committed = await ctx.emit(attrs.evolve(event, custom_metadata={"seq": seq}))
        if not any(e.id == committed.id for e in probe.delivered):
            probe.violations.append(f"{committed.id} resumed before the consumer received it")
        if committed.partial:
            return
        if not any(e.id == committed.id for e in ctx.session.events):
            probe.violations.append(f"{committed.id} resumed before it was stored")
        for key, value in committed.actions.state_delta.items():
            if ctx.session.state.get(key) != value:
                probe.violations.append(f"{key} not in the live state after commit")
        probe.emitted_by.setdefault(self.name, []).append(len(probe.delivered))


def describe_tree(agent: BaseAgent, indent: int = 0) -> str:
    """The whole tree, one agent per line, for Hypothesis failure reports."""
    own = repr(agent) if isinstance(agent, ScriptAgent) else f"{type(agent).__name__}({agent.name})"
    if isinstance(agent, LoopAgent):
        own += f" max_iterations={agent.max_iterations}"
    lines = [" " * indent + own]
    lines += [describe_tree(child, indent + 2) for child in agent.sub_agents]
    return "\n".join(lines)


@st.composite
def agent_trees(draw: st.DrawFn, probe: Probe, max_depth: int = 3) -> BaseAgent:
    """A random tree of workflow agents with scripted leaves; names are unique."""
    counter = itertools.count()
    return draw(_node(probe, counter, max_depth))


def _node(probe: Probe, counter: itertools.count[int], depth: int) -> st.SearchStrategy[BaseAgent]:
    leaf = st.lists(st.sampled_from(STEPS), max_size=5).map(
        lambda script: ScriptAgent(name=f"leaf{next(counter)}", script=tuple(script), probe=probe)
    )
    if depth <= 0:
        return leaf
    children = st.lists(st.deferred(lambda: _node(probe, counter, depth - 1)), max_size=4)
    return st.one_of(
        leaf,
        children.map(lambda c: SequentialAgent(name=f"seq{next(counter)}", sub_agents=c)),
        children.map(lambda c: ParallelAgent(name=f"par{next(counter)}", sub_agents=c)),
        st.tuples(children, st.integers(0, 3)).map(
            lambda t: LoopAgent(name=f"loop{next(counter)}", sub_agents=t[0], max_iterations=t[1])
        ),
    )


def _delta(delta: dict[str, Any]) -> EventActions:
    return EventActions(state_delta=delta)
