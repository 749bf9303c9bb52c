"""ScriptedAgent: a custom agent that follows a script of steps and checks the handshake as it goes.

Every event a scripted agent emits carries ``custom_metadata["fuzz"]`` naming the agent, its run
(1 for its first run in the invocation, 2 for the second pass of a loop, ...), the step and the
agent's emit counter, so a test can tell exactly which step of which run produced an event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, TypeAlias, get_args

import attrs
import trio

from .._content import Content, Part
from .._context import InvocationContext
from .._errors import TrioAgentsError
from .._events import Event, EventActions
from .._state import TEMP_PREFIX
from ..agents._base import BaseAgent

__all__ = ["InjectedError", "ScriptedAgent", "Step", "Trace"]

StepKind: TypeAlias = Literal["emit", "partial", "escalate", "call", "sleep", "raise"]
STEP_KINDS: tuple[str, ...] = get_args(StepKind)
SCOPES = ("", "app:", "user:", "temp:")
LEAF_TOOL = "leaf_tool"
"""The function name of a scripted agent's ``call`` steps."""


class InjectedError(TrioAgentsError):
    """The failure a test injected on purpose (a ``raise`` step, a failing scripted tool or model).

    ``agent`` names the agent that failed.
    """

    def __init__(self, message: str, *, agent: str) -> None:
        super().__init__(message)
        self.agent = agent


@attrs.frozen
class Step:
    """One step of a :class:`ScriptedAgent`'s script.

    * ``emit``: an event whose state delta sets ``<scope><agent>.<index>`` to the run number
      (``scope`` is ``""``, ``"app:"``, ``"user:"`` or ``"temp:"``);
    * ``partial``: a partial event carrying a delta that must never be applied;
    * ``escalate``: an event with ``actions.escalate`` (and a delta, as ``emit``);
    * ``call``: a function-call event, a pause of ``seconds``, then its response event;
    * ``sleep``: ``trio.sleep(seconds)`` (a bare checkpoint when 0);
    * ``raise``: raise :class:`InjectedError`.
    """

    kind: StepKind
    seconds: float = 0.0
    scope: str = ""

    def __attrs_post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ValueError(f"unknown step kind {self.kind!r}; kinds are {STEP_KINDS}")
        if self.scope not in SCOPES:
            raise ValueError(f"unknown state scope {self.scope!r}; scopes are {SCOPES}")
        if self.seconds < 0:
            raise ValueError(f"a step cannot last {self.seconds} seconds")

    def __repr__(self) -> str:
        extras = [f"{self.seconds:g}s" if self.seconds else "", self.scope]
        return self.kind + "".join(f"[{e}]" for e in extras if e)


def as_step(step: Step | str) -> Step:
    """``"emit"`` → ``Step("emit")``; steps pass through."""
    return step if isinstance(step, Step) else Step(step)  # type: ignore[arg-type]


@attrs.define
class Trace:
    """What scripted agents observe from the inside, shared by every agent of an application.

    The consumer reports each event it receives with :meth:`received`; the agents then check,
    after every emit, that the consumer had the event, that the session stored it and that its
    delta was applied (the Runner commits before the agent resumes). ``running`` counts scripted
    agents whose run has not ended (0 once the run block is left).
    """

    delivered_ids: set[str] = attrs.field(factory=set)
    running: int = 0
    runs: dict[str, int] = attrs.field(factory=dict)
    emitted: dict[str, int] = attrs.field(factory=dict)
    violations: list[str] = attrs.field(factory=list)

    def received(self, event: Event) -> None:
        """Report that the consumer received ``event``."""
        self.delivered_ids.add(event.id)

    def reset(self) -> None:
        """Forget every observation, for a new run."""
        self.delivered_ids.clear()
        self.running = 0
        self.runs.clear()
        self.emitted.clear()
        self.violations.clear()


class ScriptedAgent(BaseAgent):
    """A custom agent that runs a script of :class:`Step` s (or their kind names).

    ``ScriptedAgent(name="a", script=["emit", "call", Step("sleep", seconds=2), "escalate"])``.
    With a shared :class:`Trace` it also checks the commit-before-resume rule after each emit and
    records violations in ``trace.violations``.
    """

    def __init__(
        self,
        *,
        name: str,
        script: Iterable[Step | str] = (),
        trace: Trace | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        self.script: tuple[Step, ...] = tuple(as_step(s) for s in script)
        self.trace = trace
        self._runs: dict[str, int] = {}  # untraced: runs per invocation id

    def __repr__(self) -> str:
        return f"ScriptedAgent({self.name}: {', '.join(map(repr, self.script)) or 'nothing'})"

    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        trace = self.trace
        if trace is None:
            # Untraced: count this agent's runs per invocation (a loop's second pass is run 2).
            trace = Trace()
            if ctx.invocation_id not in self._runs:
                self._runs = {ctx.invocation_id: 0}
            trace.runs[self.name] = self._runs[ctx.invocation_id]
        run = trace.runs[self.name] = trace.runs.get(self.name, 0) + 1
        if self.trace is None:
            self._runs[ctx.invocation_id] = run
        trace.running += 1
        try:
            for index, step in enumerate(self.script):
                await self._step(ctx, trace, run, index, step)
        finally:
            trace.running -= 1

    async def _step(
        self, ctx: InvocationContext, trace: Trace, run: int, index: int, step: Step
    ) -> None:
        key = f"{step.scope}{self.name}.{index}"
        if step.kind == "sleep":
            await _pause(step.seconds)
        elif step.kind == "raise":
            raise InjectedError(f"{self.name} failed at step {index} of run {run}", agent=self.name)
        elif step.kind == "partial":
            partial = Event(partial=True, actions=EventActions(state_delta={f"partial.{key}": run}))
            await self._emit(ctx, trace, partial, run, index, step.kind)
        elif step.kind == "call":
            call_id = f"{self.name}-{run}-{index}"
            call = Part.from_function_call(LEAF_TOOL, {"step": index}, id=call_id)
            await self._emit(ctx, trace, _content("model", call), run, index, "call")
            await _pause(step.seconds)
            answer = Part.from_function_response(LEAF_TOOL, {"run": run}, id=call_id)
            await self._emit(ctx, trace, _content("user", answer), run, index, "response")
        else:
            escalate = True if step.kind == "escalate" else None
            actions = EventActions(state_delta={key: run}, escalate=escalate)
            await self._emit(ctx, trace, Event(actions=actions), run, index, step.kind)

    async def _emit(
        self, ctx: InvocationContext, trace: Trace, event: Event, run: int, index: int, kind: str
    ) -> None:
        seq = trace.emitted[self.name] = trace.emitted.get(self.name, 0) + 1
        tag = {"agent": self.name, "run": run, "step": index, "kind": kind, "seq": seq}
        sent = attrs.evolve(event, custom_metadata={"fuzz": tag})
        committed = await ctx.emit(sent)
        if self.trace is not None:
            self._check_commit(ctx, trace, sent, committed)

    def _check_commit(
        self, ctx: InvocationContext, trace: Trace, sent: Event, committed: Event
    ) -> None:
        """Commit before resume, seen from the agent the moment ``emit`` returns."""
        where = f"{self.name} event {committed.id}"
        if committed.id not in trace.delivered_ids:
            trace.violations.append(f"rule 1: {where} resumed before the consumer received it")
        delta = sent.actions.state_delta
        if committed.partial:
            applied = sorted(k for k in delta if k in ctx.session.state)
            if applied:
                trace.violations.append(f"rule 3: {where} is partial but {applied} were applied")
            return
        if not any(e.id == committed.id for e in _newest_first(ctx.session.events)):
            trace.violations.append(f"rule 1: {where} resumed before it was stored")
        missing = sorted(k for k, v in delta.items() if ctx.session.state.get(k, _NOTHING) != v)
        if missing:
            trace.violations.append(f"rule 1: {where} resumed before {missing} were applied")
        persisted = sorted(k for k in committed.actions.state_delta if k.startswith(TEMP_PREFIX))
        if persisted:
            trace.violations.append(f"rule 1: {where} was committed with temp: keys {persisted}")


_NOTHING = object()


def _newest_first(events: Any) -> Iterable[Event]:
    for index in range(len(events) - 1, -1, -1):
        yield events[index]


def _content(role: str, part: Part) -> Event:
    return Event(content=Content(role=role, parts=[part]))


async def _pause(seconds: float) -> None:
    if seconds > 0:
        await trio.sleep(seconds)
    else:
        await trio.lowlevel.checkpoint()
