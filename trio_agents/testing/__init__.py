"""The testing kit: deterministic doubles, record/replay, invariant checks, random applications.

Nothing here touches the network or imports Hypothesis (the strategies live in
:mod:`trio_agents.testing.strategies`, which needs it).

Doubles and reproducible runs:

* :class:`ScriptedModel`: a model answering from a script (one entry per call) or a handler;
* :class:`ScriptedAgent`: a custom agent following a script of steps (emit, partial, escalate,
  call, sleep, raise);
* :func:`sequential_ids`, :func:`fixed_clock`: reproducible ids and timestamps;
* :func:`scheduler_seed`: replay one Trio scheduling order by its seed;
* :class:`PerturbedTiming`: a Trio instrument stretching or shrinking every sleep and timeout
  of a run by factors drawn from a seed, so slow and fast tasks finish in other orders too.

Running and checking:

* :func:`collect`: run once, get the delivered events and the stored session;
* :func:`normalize`: events as JSON without ids and timestamps, for golden comparisons;
* :func:`check_invariants` / :func:`assert_invariants` (or :meth:`Collected.violations`): the
  Runner's handshake rules on a finished run, delivery and state changes without events included;
* :class:`RecordingPlugin`: every hook call with its arguments.

Model traffic: :class:`RecordingModel` records a real model's answers keyed by
:func:`request_key`; :class:`ReplayModel` replays them offline (a miss raises
:class:`ReplayMissError`).

Random applications (drawn by :func:`trio_agents.testing.strategies.applications`):
:class:`Application`, :func:`run_application` with a :class:`Stop`, :class:`AppRun`.
"""

from __future__ import annotations

from .._exports import publish as _publish
from ..models._request_key import request_key as request_key
from ._agents import (
    InjectedError as InjectedError,
    ScriptedAgent as ScriptedAgent,
    Step as Step,
    Trace as Trace,
)
from ._apps import (
    Application as Application,
    AppRun as AppRun,
    Stop as Stop,
    run_application as run_application,
)
from ._invariants import (
    assert_invariants as assert_invariants,
    check_invariants as check_invariants,
)
from ._planned import (
    PlannedModel as PlannedModel,
    Turn as Turn,
    fuzz_tool as fuzz_tool,
    planned_agent as planned_agent,
)
from ._recording import (
    HookCall as HookCall,
    RecordingPlugin as RecordingPlugin,
)
from ._replay import (
    RecordingModel as RecordingModel,
    ReplayMissError as ReplayMissError,
    ReplayModel as ReplayModel,
)
from ._runs import (
    Collected as Collected,
    collect as collect,
    normalize as normalize,
)
from ._scripted import (
    ScriptedModel as ScriptedModel,
    fixed_clock as fixed_clock,
    sequential_ids as sequential_ids,
)
from ._seeds import (
    scheduler_seed as scheduler_seed,
)
from ._timing import (
    PerturbedTiming as PerturbedTiming,
)

__all__ = [
    "AppRun",
    "Application",
    "Collected",
    "HookCall",
    "InjectedError",
    "PerturbedTiming",
    "PlannedModel",
    "RecordingModel",
    "RecordingPlugin",
    "ReplayMissError",
    "ReplayModel",
    "ScriptedAgent",
    "ScriptedModel",
    "Step",
    "Stop",
    "Trace",
    "Turn",
    "assert_invariants",
    "check_invariants",
    "collect",
    "fixed_clock",
    "fuzz_tool",
    "normalize",
    "planned_agent",
    "request_key",
    "run_application",
    "scheduler_seed",
    "sequential_ids",
]

_publish(__name__, globals(), __all__)
