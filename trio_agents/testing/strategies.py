"""Hypothesis strategies for trio_agents: content, events, state deltas, random applications and
Trio scheduling orders. Requires ``hypothesis`` (``pip install hypothesis``).

Data: :func:`json_values`, :func:`state_deltas`, :func:`parts`, :func:`contents`,
:func:`event_actions`, :func:`events`.

Applications: :func:`applications` draws an :class:`~trio_agents.testing.Application`, a tree
of Sequential / Parallel / Loop agents over :class:`~trio_agents.testing.ScriptedAgent` s
(state deltas, partial events, escalations, function calls, sleeps, failures) and LLM agents
driven by planned scripted models (text, streamed text, concurrent tool calls, ``exit_loop``,
transfers, failing models and tools). :func:`stops` draws how a run ends (the consumer leaving,
``cancel()``, a timeout). Run one with :func:`~trio_agents.testing.run_application` and check it
with :meth:`~trio_agents.testing.Application.violations`.

Interleavings: Trio orders the tasks that are ready to run at random, and Hypothesis controls
that randomness: :func:`interleavings` draws one order (it draws ``st.random_module()``, which
seeds Trio's scheduler). A falsifying example names it as ``Interleaving(seed=N)``; replay it
with :func:`~trio_agents.testing.scheduler_seed` or ``explore_interleavings(..., seed=N)``::

    @given(app=applications(), stop=stops(), interleaving=interleavings())
    def test_my_plugin_keeps_the_rules(app, stop, interleaving):
        clock = trio.testing.MockClock(autojump_threshold=0)
        run = trio.run(partial(run_application, app, stop, plugins=[MyPlugin()]), clock=clock)
        assert app.violations(run) == []

:func:`explore_interleavings` runs one scenario under many interleavings in a plain test.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import attrs
import trio
from hypothesis import HealthCheck, given, note, settings, strategies as st

from .._content import Blob, Content, FunctionCall, FunctionResponse, Part
from .._events import Event, EventActions
from ..agents._base import BaseAgent
from ..agents._llm import LlmAgent
from ..agents._loop import LoopAgent
from ..agents._parallel import ParallelAgent
from ..agents._sequential import SequentialAgent
from ._agents import SCOPES, ScriptedAgent, Step, Trace
from ._apps import Application, Stop
from ._planned import Turn, planned_agent
from ._seeds import scheduler_seed

__all__ = [
    "Interleaving",
    "applications",
    "contents",
    "event_actions",
    "events",
    "explore_interleavings",
    "interleavings",
    "json_values",
    "parts",
    "scripts",
    "state_deltas",
    "state_keys",
    "stops",
    "turns",
]

# -- JSON and state -------------------------------------------------------------------------------

_NAME_CHARS = string.ascii_letters + string.digits + "_"

json_scalars: st.SearchStrategy[Any] = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)


def json_values(*, max_leaves: int = 10) -> st.SearchStrategy[Any]:
    """JSON values: None, bools, integers within ±2**53, finite floats, text, lists, objects."""
    return st.recursive(
        json_scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
        max_leaves=max_leaves,
    )


def state_keys(*, scopes: Sequence[str] = SCOPES) -> st.SearchStrategy[str]:
    """State keys, each in one of ``scopes`` (``""`` session, ``app:``, ``user:``, ``temp:``)."""
    names = st.text(_NAME_CHARS, min_size=1, max_size=8)
    return st.builds(lambda scope, name: scope + name, st.sampled_from(list(scopes)), names)


def state_deltas(
    *,
    keys: st.SearchStrategy[str] | None = None,
    values: st.SearchStrategy[Any] | None = None,
    max_size: int = 4,
) -> st.SearchStrategy[dict[str, Any]]:
    """State deltas: :func:`state_keys` (all scopes) to :func:`json_values` by default."""
    return st.dictionaries(
        keys if keys is not None else state_keys(),
        values if values is not None else json_values(max_leaves=4),
        max_size=max_size,
    )


# -- content and events ---------------------------------------------------------------------------

_names = st.text(_NAME_CHARS, min_size=1, max_size=10)
_objects = st.dictionaries(st.text(max_size=8), json_values(max_leaves=4), max_size=3)


def parts() -> st.SearchStrategy[Part]:
    """One part each: text (maybe a thought), a function call or response, or inline bytes."""
    return st.one_of(
        st.builds(Part, text=st.text(max_size=20)),
        st.builds(Part, text=st.text(max_size=20), thought=st.just(True)),
        st.builds(
            lambda name, args, call_id: Part(
                function_call=FunctionCall(name=name, args=args, id=call_id)
            ),
            _names,
            _objects,
            st.none() | _names,
        ),
        st.builds(
            lambda name, response, call_id: Part(
                function_response=FunctionResponse(name=name, response=response, id=call_id)
            ),
            _names,
            _objects,
            st.none() | _names,
        ),
        st.builds(
            lambda data, mime: Part(inline_data=Blob(data=data, mime_type=mime)),
            st.binary(max_size=24),
            st.sampled_from(["image/png", "audio/wav", "application/pdf"]),
        ),
    )


def contents(*, roles: Sequence[str] = ("user", "model")) -> st.SearchStrategy[Content]:
    """Content with one to three :func:`parts` and a role from ``roles``."""
    return st.builds(
        Content, role=st.sampled_from(list(roles)), parts=st.lists(parts(), min_size=1, max_size=3)
    )


def event_actions(
    *, state_delta: st.SearchStrategy[dict[str, Any]] | None = None
) -> st.SearchStrategy[EventActions]:
    """Event actions: a state delta (:func:`state_deltas` by default), artifact versions, maybe
    a transfer, an escalation or ``skip_summarization``."""
    return st.builds(
        EventActions,
        state_delta=state_delta if state_delta is not None else state_deltas(),
        artifact_delta=st.dictionaries(_names, st.integers(0, 100), max_size=2),
        transfer_to_agent=st.none() | _names,
        escalate=st.none() | st.booleans(),
        skip_summarization=st.none() | st.booleans(),
    )


def events(
    *,
    authors: st.SearchStrategy[str] | None = None,
    partial: st.SearchStrategy[bool | None] | None = None,
    actions: st.SearchStrategy[EventActions] | None = None,
    timestamps: st.SearchStrategy[float] | None = None,
) -> st.SearchStrategy[Event]:
    """Events as an agent would emit them (storable: every delta value is JSON).

    ``authors`` defaults to agent-like names, ``partial`` to None/False/True, ``actions`` to
    :func:`event_actions`, ``timestamps`` to the current clock at construction.
    """
    fields: dict[str, st.SearchStrategy[Any]] = {
        "author": authors if authors is not None else _names.filter(lambda n: n != "user"),
        "invocation_id": st.builds(lambda n: f"e-{n}", _names),
        "branch": st.none() | _names,
        "content": st.none() | contents(),
        "partial": partial if partial is not None else st.sampled_from([None, False, True]),
        "turn_complete": st.none() | st.booleans(),
        "error_code": st.none() | _names,
        "error_message": st.none() | st.text(max_size=20),
        "custom_metadata": st.none() | _objects,
        "actions": actions if actions is not None else event_actions(),
    }
    if timestamps is not None:
        fields["timestamp"] = timestamps
    return st.builds(Event, **fields)


# -- random applications --------------------------------------------------------------------------

_SECONDS = st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.5])


def scripts(*, max_steps: int = 5, failures: bool = True) -> st.SearchStrategy[list[Step]]:
    """Scripts for :class:`~trio_agents.testing.ScriptedAgent` (``raise`` steps if
    ``failures``)."""
    kinds = ["emit", "emit", "partial", "escalate", "call", "sleep"] + (
        ["raise"] if failures else []
    )
    step = st.builds(
        Step, kind=st.sampled_from(kinds), seconds=_SECONDS, scope=st.sampled_from(["", *SCOPES])
    )
    return st.lists(step, max_size=max_steps)


def turns(targets: Sequence[str] = (), *, failures: bool = True) -> st.SearchStrategy[Turn]:
    """Turns of a planned LLM agent; transfers go to one of ``targets``."""
    options = [
        st.builds(Turn, kind=st.just("text"), chunks=st.integers(1, 3)),
        st.builds(Turn, kind=st.just("tools"), calls=st.integers(1, 3), seconds=_SECONDS),
        st.just(Turn("exit_loop")),
    ]
    if targets:
        options.append(st.builds(Turn, kind=st.just("transfer"), target=st.sampled_from(targets)))
    if failures:
        options += [
            st.just(Turn("fail")),
            st.builds(Turn, kind=st.just("tool_fail"), seconds=_SECONDS),
        ]
    return st.one_of(options)


@attrs.define
class _Draft:
    trace: Trace
    counter: Iterator[int]
    max_children: int
    max_steps: int
    failures: bool
    llm: bool

    def name(self, kind: str) -> str:
        return f"{kind}{next(self.counter)}"


def _draw_node(draw: st.DrawFn, draft: _Draft, depth: int) -> BaseAgent:
    kinds = ["leaf", "llm"] if draft.llm else ["leaf"]
    if depth > 0:
        kinds += ["seq", "par", "loop"]
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        script = draw(scripts(max_steps=draft.max_steps, failures=draft.failures))
        return ScriptedAgent(name=draft.name("leaf"), script=script, trace=draft.trace)
    if kind == "llm":
        return _draw_cluster(draw, draft)
    count = draw(st.integers(0, draft.max_children))
    children = [_draw_node(draw, draft, depth - 1) for _ in range(count)]
    if kind == "seq":
        return SequentialAgent(name=draft.name("seq"), sub_agents=children)
    if kind == "par":
        return ParallelAgent(name=draft.name("par"), sub_agents=children)
    limit = draw(st.integers(0, 3))
    return LoopAgent(name=draft.name("loop"), sub_agents=children, max_iterations=limit)


def _draw_cluster(draw: st.DrawFn, draft: _Draft) -> LlmAgent:
    """An LLM agent with zero to two LLM sub-agents, each following a plan of turns."""
    root = draft.name("llm")
    helpers = [draft.name("llm") for _ in range(draw(st.integers(0, 2)))]

    def plan(targets: list[str]) -> list[Turn]:
        return draw(st.lists(turns(targets, failures=draft.failures), max_size=3))

    subs = [planned_agent(h, plan([root, *(p for p in helpers if p != h)])) for h in helpers]
    return planned_agent(root, plan(helpers), sub_agents=subs)


@st.composite
def applications(
    draw: st.DrawFn,
    *,
    max_depth: int = 3,
    max_children: int = 3,
    max_steps: int = 5,
    failures: bool = True,
    llm: bool = True,
    streaming: bool | None = None,
) -> Application:
    """Random applications (see the module docstring); every agent name is unique.

    ``failures=False`` leaves out ``raise`` steps and failing models and tools; ``llm=False``
    leaves out LLM agents; ``streaming`` (drawn when None) runs the application in SSE mode.
    """
    draft = _Draft(Trace(), itertools.count(), max_children, max_steps, failures, llm)
    root = _draw_node(draw, draft, max_depth)
    sse = draw(st.booleans()) if streaming is None else streaming
    return Application(root, draft.trace, sse)


def stops(*, max_after: int = 12, max_at: float = 5.0) -> st.SearchStrategy[Stop]:
    """How a run ends: completion, the consumer leaving or cancelling after at most ``max_after``
    events, or a cancel / timeout at most ``max_at`` (mock-clock) seconds in."""
    if max_after < 0 or max_at < 0:
        raise ValueError("max_after and max_at cannot be negative")
    steps = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0]
    times = st.sampled_from(sorted({t for t in steps if t < max_at} | {max_at}))
    return st.one_of(
        st.just(Stop()),
        st.builds(Stop, kind=st.sampled_from(["leave", "cancel"]), after=st.integers(0, max_after)),
        st.builds(Stop, kind=st.sampled_from(["cancel_at", "timeout"]), at=times),
    )


# -- interleavings --------------------------------------------------------------------------------


@attrs.frozen
class Interleaving:
    """One Trio scheduling order, by seed (what :func:`interleavings` draws)."""

    seed: int

    def replay(self) -> Any:
        """A context manager that makes Trio schedule as in this interleaving."""
        return scheduler_seed(self.seed)

    def __repr__(self) -> str:
        return f"Interleaving(seed={self.seed})"


def interleavings() -> st.SearchStrategy[Interleaving]:
    """One scheduling order per example: draws ``st.random_module()``, which seeds Trio's
    scheduler (and :mod:`random`) for the example. Without it, every example of a test sees the
    same order. Shrinking shrinks the seed, so a reported order is reproducible, not minimal."""
    return st.random_module().map(lambda seeder: Interleaving(int(seeder.seed)))


def explore_interleavings(
    scenario: Callable[[], Awaitable[object]],
    *,
    max_examples: int = 100,
    clock: Callable[[], trio.abc.Clock] | None = None,
    seed: int | None = None,
) -> None:
    """Run ``trio.run(scenario)`` under ``max_examples`` scheduling orders; any failure fails.

    Call it from a plain (not async) test; ``scenario`` builds everything it needs, so each run
    starts fresh. ``clock`` makes a clock per run, e.g.
    ``lambda: trio.testing.MockClock(autojump_threshold=0)`` to skip sleeps and timeouts. The
    failure report names the order (``Interleaving(seed=N)``, also added as a note to the
    exception); ``seed=N`` then runs exactly that order again, without Hypothesis.
    """

    def run_once(interleaving: Interleaving) -> None:
        try:
            trio.run(scenario, clock=clock() if clock is not None else None)
        except BaseException as exc:
            exc.add_note(
                f"Trio scheduling order: {interleaving!r} "
                f"(run it again with explore_interleavings(..., seed={interleaving.seed}))"
            )
            raise

    if seed is not None:
        with scheduler_seed(seed):
            run_once(Interleaving(seed))
        return

    @settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(interleaving=interleavings())
    def explore(interleaving: Interleaving) -> None:
        note(f"Trio scheduling order: {interleaving!r}")
        run_once(interleaving)

    explore()
