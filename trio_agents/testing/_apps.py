"""Random applications: run one, stop it in a chosen way, and list every rule it broke.

:func:`trio_agents.testing.strategies.applications` draws :class:`Application` s; this module
runs and checks them and needs no Hypothesis::

    run = await run_application(app, Stop("cancel", after=3))
    assert app.violations(run) == []
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Literal, TypeAlias, get_args

import attrs
import trio

from .._events import Event
from .._runner import RunConfig, Runner, RunStream, StreamingMode
from ..agents._base import BaseAgent
from ..agents._loop import LoopAgent
from ..plugins._base import BasePlugin
from ..sessions._base import Session, SessionService
from ..sessions._memory import InMemorySessionService
from ._agents import InjectedError, ScriptedAgent, Trace
from ._invariants import check_invariants
from ._oracle import Reference
from ._planned import PlannedModel
from ._recording import RecordingPlugin

__all__ = ["AppRun", "Application", "Stop", "run_application"]

APP_NAME = "fuzz"
USER_ID = "fuzzer"

StopKind: TypeAlias = Literal["complete", "leave", "cancel", "cancel_at", "timeout"]
STOP_KINDS: tuple[str, ...] = get_args(StopKind)


@attrs.frozen
class Stop:
    """How a run ends.

    * ``complete``: the consumer reads every event;
    * ``leave``: the consumer leaves the ``async with`` block after ``after`` events;
    * ``cancel``: the consumer calls ``events.cancel()`` after ``after`` events, then reads on;
    * ``cancel_at``: another task calls ``events.cancel()`` ``at`` seconds into the run;
    * ``timeout``: a cancel scope around the whole run expires ``at`` seconds into it.

    Times are Trio clock seconds: run under ``trio.testing.MockClock(autojump_threshold=0)``
    they cost nothing.
    """

    kind: StopKind = "complete"
    after: int = 0
    at: float = 0.0

    def __attrs_post_init__(self) -> None:
        if self.kind not in STOP_KINDS:
            raise ValueError(f"unknown stop {self.kind!r}; stops are {STOP_KINDS}")

    def __repr__(self) -> str:
        if self.kind in ("leave", "cancel"):
            return f"Stop({self.kind!r}, after={self.after})"
        if self.kind in ("cancel_at", "timeout"):
            return f"Stop({self.kind!r}, at={self.at:g})"
        return "Stop('complete')"


@attrs.frozen
class AppRun:
    """What one run of an application did.

    ``delivered``: the events the consumer received; ``session``: the stored session afterwards;
    ``error``: what the run raised (None if nothing); ``stopped``: whether the stop fired before
    the run ended on its own; ``hooks``: the hook calls, when recorded; ``live_state``: the
    state of the run's live session when it ended (None if it never started).
    """

    delivered: list[Event]
    session: Session
    error: Exception | None
    stop: Stop
    stopped: bool
    hooks: RecordingPlugin | None = None
    live_state: dict[str, Any] | None = None

    @property
    def consumer_left(self) -> bool:
        """Whether the consumer stopped reading before the run ended (it left the block, or a
        timeout cancelled it), so the run's last events may never have reached it."""
        return self.stopped and self.stop.kind in ("leave", "timeout")


@attrs.define(eq=False)
class Application:
    """An agent tree of workflow agents over scripted and planned agents, with its oracle.

    ``root`` is the tree; ``trace`` is shared by its :class:`ScriptedAgent` s; ``streaming`` runs
    it in SSE mode. The tree must be built from ``SequentialAgent``, ``ParallelAgent``,
    ``LoopAgent`` (with a ``max_iterations``), :class:`ScriptedAgent` and LLM agents whose model
    is a planned model (see :mod:`trio_agents.testing.strategies`).
    """

    root: BaseAgent
    trace: Trace = attrs.field(factory=Trace)
    streaming: bool = False

    @property
    def run_config(self) -> RunConfig:
        """The configuration to run the application with (streamed or not)."""
        mode = StreamingMode.SSE if self.streaming else StreamingMode.NONE
        return RunConfig(streaming_mode=mode)

    def reset(self) -> None:
        """Forget what earlier runs did, so the application can run again."""
        self.trace.reset()
        for agent in _walk(self.root):
            model = getattr(agent, "model", None)
            if isinstance(model, PlannedModel):
                model.reset()

    def describe(self) -> str:
        """The whole tree, one agent per line (for failure reports)."""
        return _describe(self.root, 0) + ("\n(streaming: SSE)" if self.streaming else "")

    def __repr__(self) -> str:
        return "Application(\n" + self.describe() + "\n)"

    def violations(self, run: AppRun) -> list[str]:
        """Every rule the run broke: the handshake rules and the workflow ordering rules."""
        if run.stopped and not any(e.author == "user" for e in run.session.events):
            return _never_started(run)
        problems = check_invariants(
            run.delivered, run.session, live_state=run.live_state, consumer_left=run.consumer_left
        )
        problems += self.trace.violations
        if self.trace.running:
            problems.append(f"rule 5: {self.trace.running} scripted agents still running")
        reference = Reference(self.root, streaming=self.streaming)
        problems += reference.feed(_without_aftermath(run.delivered))
        problems += _ending(reference, run)
        if run.hooks is not None:
            problems += _hook_problems(run)
        return problems


def _without_aftermath(delivered: list[Event]) -> list[Event]:
    """The agents' events: the Runner's closing responses and error events at the end dropped."""
    end = len(delivered)
    while end and _is_aftermath(delivered[end - 1]):
        end -= 1
    return delivered[:end]


def _is_aftermath(event: Event) -> bool:
    if event.content is None:
        return bool(event.error_code) and not event.partial
    responses = event.get_function_responses()
    return bool(responses) and all(r.response.get("error") == "cancelled" for r in responses)


def _walk(agent: BaseAgent) -> Iterator[BaseAgent]:
    yield agent
    for child in agent.sub_agents:
        yield from _walk(child)


def _describe(agent: BaseAgent, depth: int) -> str:
    if isinstance(agent, ScriptedAgent):
        line = repr(agent)
    elif isinstance(getattr(agent, "model", None), PlannedModel):
        plan = agent.model.plan  # type: ignore[attr-defined]
        line = f"LlmAgent({agent.name}: {', '.join(map(repr, plan)) or 'text'})"
    elif isinstance(agent, LoopAgent):
        line = f"LoopAgent({agent.name}, max_iterations={agent.max_iterations})"
    else:
        line = f"{type(agent).__name__}({agent.name})"
    return "\n".join(["  " * depth + line, *(_describe(c, depth + 1) for c in agent.sub_agents)])


def _never_started(run: AppRun) -> list[str]:
    """The stop fired before the run stored its user event: nothing may have happened."""
    problems = []
    if run.delivered or run.session.events:
        problems.append(
            f"stop: {len(run.delivered)} events delivered and {len(run.session.events)} "
            "stored, but the user event never was"
        )
    if run.hooks is not None and run.hooks.calls:
        problems.append(f"hooks: {run.hooks.hooks()} ran for a run that never started")
    return problems


def _injected(error: BaseException) -> list[InjectedError]:
    """The injected failures inside ``error`` (groups flattened, causes followed)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for sub in error.exceptions for leaf in _injected(sub)]
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, InjectedError):
            return [seen]
        seen = seen.__cause__
    return []


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for sub in error.exceptions for leaf in _leaves(sub)]
    return [error]


def _ending(reference: Reference, run: AppRun) -> list[str]:
    """How the run ended must match the reference: complete, failed where it could, or stopped."""
    errors_stored = [e for e in run.session.events if e.error_code]
    if run.error is None:
        problems = []
        if errors_stored:
            problems.append(
                f"rule 6: {len(errors_stored)} error events stored by a run that did not fail"
            )
        if not run.stopped and not reference.done():
            shown = ", ".join(map(str, reference.expected())) or "an agent to fail"
            problems.append(f"completion: the run ended early; the reference still expects {shown}")
        return problems
    injected = _injected(run.error)
    problems = []
    if len(injected) != len(_leaves(run.error)):
        problems.append(f"rule 6: the run raised {run.error!r}, not (only) injected failures")
    failing = set(reference.failing())
    problems += [
        f"failure: {e.agent} failed ({e}) but the reference has it elsewhere "
        f"(agents at a failure point: {sorted(failing)})"
        for e in injected
        if e.agent not in failing
    ]
    authors = sorted(e.author for e in errors_stored)
    if sorted(e.agent for e in injected) != authors:
        problems.append(
            f"rule 6: error events stored for {authors}, failures raised by "
            f"{sorted(e.agent for e in injected)}"
        )
    problems += [
        f"rule 6: error event {e.id} has code {e.error_code!r}"
        for e in errors_stored
        if e.error_code != "InjectedError"
    ]
    return problems


def _hook_problems(run: AppRun) -> list[str]:
    assert run.hooks is not None
    names = run.hooks.hooks()
    problems = []
    terminal = "on_run_error" if run.error is not None else "after_run"
    other = "after_run" if run.error is not None else "on_run_error"
    if names.count(terminal) != 1 or names.count(other) != 0:
        problems.append(
            f"hooks: {terminal} ran {names.count(terminal)} times and {other} "
            f"{names.count(other)} times"
        )
    elif names[-1] != terminal:
        problems.append(f"hooks: {names[-1]} ran after {terminal}")
    if names[:2] != ["on_user_message", "before_run"]:
        problems.append(f"hooks: the run began with {names[:2]}")
    on_event = names.count("on_event")
    if on_event != len(run.delivered):
        problems.append(f"hooks: on_event ran {on_event} times for {len(run.delivered)} events")
    return problems


async def run_application(
    app: Application,
    stop: Stop = Stop(),
    *,
    session_service: SessionService | None = None,
    plugins: Sequence[BasePlugin] = (),
    record_hooks: bool = False,
    new_message: str = "go",
) -> AppRun:
    """Run ``app`` once on a fresh session, end it as ``stop`` says, and report what happened.

    ``session_service`` defaults to a fresh in-memory one; with ``record_hooks`` a
    :class:`RecordingPlugin` joins ``plugins`` and :meth:`Application.violations` also checks the
    hook sequence. Exceptions of the run are returned in :attr:`AppRun.error`.
    """
    app.reset()
    service = session_service if session_service is not None else InMemorySessionService()
    hooks = RecordingPlugin() if record_hooks else None
    runner = Runner(
        agent=app.root,
        app_name=APP_NAME,
        session_service=service,
        plugins=[*plugins, *([hooks] if hooks else [])],
    )
    session = await service.create_session(app_name=APP_NAME, user_id=USER_ID)
    delivered: list[Event] = []
    error: Exception | None = None
    stopped = False
    stream: RunStream | None = None
    with trio.CancelScope() as deadline:
        if stop.kind == "timeout":
            deadline.deadline = trio.current_time() + stop.at
        try:
            async with runner.run(
                user_id=USER_ID,
                session_id=session.id,
                new_message=new_message,
                run_config=app.run_config,
            ) as stream:
                stopped = await _consume(app, stream, stop, delivered)
        except Exception as exc:
            error = exc
    stopped = stopped or deadline.cancelled_caught
    stored = await service.get_session(app_name=APP_NAME, user_id=USER_ID, session_id=session.id)
    assert stored is not None, f"session {session.id} vanished"
    live_state = None if stream is None else dict(stream.session.state)
    return AppRun(delivered, stored, error, stop, stopped, hooks, live_state)


async def _consume(app: Application, events: RunStream, stop: Stop, delivered: list[Event]) -> bool:
    """Read events until the stream ends or ``stop`` fires; return whether it fired."""
    fired = False

    async def cancel_later() -> None:
        nonlocal fired
        await trio.sleep(stop.at)
        fired = True
        events.cancel("the test cancels the run")

    def counted_stop() -> bool:
        """Fire a ``leave`` / ``cancel`` stop once ``after`` events arrived; True to leave."""
        nonlocal fired
        if fired or stop.kind not in ("leave", "cancel") or len(delivered) < stop.after:
            return False
        fired = True
        if stop.kind == "cancel":
            events.cancel("the consumer cancels the run")
        return stop.kind == "leave"

    async with trio.open_nursery() as nursery:
        if stop.kind == "cancel_at":
            nursery.start_soon(cancel_later)
        if not counted_stop():
            async for event in events:
                app.trace.received(event)
                delivered.append(event)
                if counted_stop():
                    break
        nursery.cancel_scope.cancel()
    return fired
