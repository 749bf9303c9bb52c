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
seeds Trio's scheduler) and, from the same seed, how long every sleep and timeout of the run
lasts (:class:`~trio_agents.testing.PerturbedTiming`), so a slow task also gets to finish
before a fast one. A falsifying example names it as ``Interleaving(seed=N)``; replay it with
``Interleaving(N).run(...)`` or ``explore_interleavings(..., seed=N)``::

    @given(app=applications(), stop=stops(), interleaving=interleavings())
    def test_my_plugin_keeps_the_rules(app, stop, interleaving):
        run = interleaving.run(partial(run_application, app, stop, plugins=[MyPlugin()]))
        assert app.violations(run) == []

:func:`explore_interleavings` runs one scenario under many interleavings in a plain test.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

import attrs
import hypothesis
import trio
import trio.testing
from hypothesis import HealthCheck, given, note, strategies as st

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
from ._timing import DEFAULT_SPREAD, PerturbedTiming, check_spread

T = TypeVar("T")

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
    """One Trio scheduling order and timing, by seed (what :func:`interleavings` draws).

    ``timing`` is how far sleeps and timeouts may stretch or shrink (a factor between
    ``1 / timing`` and ``timing``, see :class:`~trio_agents.testing.PerturbedTiming`); None
    keeps their lengths and explores the order only.
    """

    seed: int
    timing: float | None = DEFAULT_SPREAD

    def __attrs_post_init__(self) -> None:
        check_spread(self.timing)

    def replay(self) -> Any:
        """A context manager that makes Trio schedule as in this interleaving (the order only:
        :meth:`run` replays the timing too)."""
        return scheduler_seed(self.seed)

    def instruments(self) -> list[trio.abc.Instrument]:
        """The instruments that give a run this interleaving's timing."""
        return [] if self.timing is None else [PerturbedTiming(self.seed, spread=self.timing)]

    def run(
        self,
        async_fn: Callable[..., Awaitable[T]],
        *args: object,
        clock: trio.abc.Clock | None = None,
    ) -> T:
        """``trio.run(async_fn, *args)`` in this interleaving's order and timing, on ``clock``
        (a fresh ``MockClock(autojump_threshold=0)`` by default: sleeps cost nothing)."""
        with self.replay():
            return trio.run(
                async_fn,
                *args,
                clock=clock if clock is not None else trio.testing.MockClock(autojump_threshold=0),
                instruments=self.instruments(),
            )

    def __repr__(self) -> str:
        if self.timing == DEFAULT_SPREAD:
            return f"Interleaving(seed={self.seed})"
        return f"Interleaving(seed={self.seed}, timing={self.timing})"


def interleavings(*, timing: float | None = DEFAULT_SPREAD) -> st.SearchStrategy[Interleaving]:
    """One scheduling order and timing per example: draws ``st.random_module()``, which seeds
    Trio's scheduler (and :mod:`random`) for the example, and the same seed draws how long each
    sleep and timeout lasts when the run goes through :meth:`Interleaving.run` (``timing=None``:
    as written). Without it, every example of a test sees the same order. Shrinking shrinks the
    seed, so a reported interleaving is reproducible, not minimal."""
    check_spread(timing)
    return st.random_module().map(lambda seeder: Interleaving(int(seeder.seed), timing))


def explore_interleavings(
    scenario: Callable[[], Awaitable[object]],
    *,
    max_examples: int | None = None,
    clock: Callable[[], trio.abc.Clock] | None = None,
    seed: int | None = None,
    timing: float | None = DEFAULT_SPREAD,
    settings: hypothesis.settings | None = None,
) -> None:
    """Run ``trio.run(scenario)`` under many scheduling orders and timings; any failure fails.

    Call it from a plain (not async) test; ``scenario`` builds everything it needs, so each run
    starts fresh. Each run draws a seed, which orders the tasks that are ready together and,
    with ``timing`` (a number >= 1, by default 10), stretches or shrinks every sleep and timeout
    of the run by a factor between ``1 / timing`` and ``timing``: a branch that is ten times
    slower than another also gets to finish first. ``timing=None`` explores the order only.
    Timeouts inside the scenario are perturbed like sleeps, hang guards included: give those
    room, or set them around the call.

    Time is virtual: ``clock`` makes a clock per run, by default
    ``trio.testing.MockClock(autojump_threshold=0)``, which jumps ahead whenever every task is
    blocked, so sleeps cost nothing. A scenario that waits on threads, processes or sockets
    needs a clock that does not jump meanwhile (``MockClock(rate=1)``, or one with a higher
    ``autojump_threshold``).

    ``max_examples`` (default 100) is how many runs; ``settings`` (a ``hypothesis.settings``)
    sets anything else, e.g. ``deadline`` (None by default) or ``database``. Failures are saved
    in the example database under this scenario's name, so each scenario replays its own.

    The failure report names the interleaving (``Interleaving(seed=N)``, also added as a note
    to the exception); ``seed=N`` runs exactly that order and timing again, without
    Hypothesis. A seed replays the same code only: any change that adds or removes a
    checkpoint, a task or a sleep gives the same seed another order and other timings, so a
    test pinned to a seed pins a reproduction, not a schedule.
    """
    check_spread(timing)
    make_clock = clock if clock is not None else _virtual_clock

    def run_once(interleaving: Interleaving) -> None:
        try:
            interleaving.run(scenario, clock=make_clock())
        except BaseException as exc:
            exc.add_note(
                f"Trio scheduling order and timing: {interleaving!r} (run it again with "
                f"explore_interleavings(..., seed={interleaving.seed}))"
            )
            raise

    if seed is not None:
        run_once(Interleaving(seed, timing))
        return

    def explore(interleaving: Interleaving) -> None:
        note(f"Trio scheduling order and timing: {interleaving!r}")
        run_once(interleaving)

    name = _scenario_name(scenario)
    explore.__name__ = explore.__qualname__ = _identifier(name)  # what the report calls it
    # one example-database entry per scenario, not one shared by every caller
    explore._hypothesis_internal_add_digest = name.encode()  # type: ignore[attr-defined]
    test = given(interleaving=interleavings(timing=timing))(explore)
    _explore_settings(settings, max_examples)(test)()


def _virtual_clock() -> trio.abc.Clock:
    return trio.testing.MockClock(autojump_threshold=0)


def _scenario_name(scenario: Callable[..., object]) -> str:
    """The scenario's module and qualified name, and the functions and plain values it closes
    over or is a partial of, so two closures made by one factory keep apart (values whose
    ``repr`` may change from one process to the next are left out)."""
    target = getattr(scenario, "func", scenario)  # functools.partial: the function it calls
    bound = [*getattr(scenario, "args", ()), *getattr(scenario, "keywords", {}).values()]
    bound += [cell.cell_contents for cell in getattr(target, "__closure__", None) or ()]
    return "|".join([_qualified(target), *filter(None, map(_stable_name, bound))])


def _stable_name(value: object) -> str | None:
    if value is None or isinstance(value, str | int | float | bool):
        return repr(value)
    return _qualified(value) if callable(value) else None


def _qualified(value: object) -> str:
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', '?')}"


def _identifier(name: str) -> str:
    short = name.split("|", 1)[0].rsplit(".", 1)[-1]
    return short if short.isidentifier() else "scenario"


def _explore_settings(
    given_settings: hypothesis.settings | None, max_examples: int | None
) -> hypothesis.settings:
    """The caller's settings (or ours: no deadline), with ``max_examples`` and the health
    checks that a Trio run per example trips."""
    base = (
        given_settings
        if given_settings is not None
        else hypothesis.settings(deadline=None, max_examples=100)
    )
    checks = {
        *base.suppress_health_check,
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
    }
    return hypothesis.settings(
        base,
        max_examples=max_examples if max_examples is not None else base.max_examples,
        suppress_health_check=list(checks),
    )
