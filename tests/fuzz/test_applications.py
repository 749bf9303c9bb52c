"""Random applications × Trio interleavings × ways of stopping (issue 8, item 3).

Each example draws an application (Sequential / Parallel / Loop trees over scripted agents and
planned LLM agents, see :mod:`trio_agents.testing.strategies`), a scheduling order
(``st.random_module()``, which also stretches or shrinks every sleep and timeout) and a way to
stop the run: completion, the consumer leaving after k events, ``cancel()`` after k events or
from another task at time t, or a timeout, all under ``MockClock(autojump_threshold=0)``;
injected failures (``raise`` steps, failing models and tools) make branches fail. Every run is
then checked against:

* ARCHITECTURE §2: rule 1 (checked by the agents at every emit: stored, applied, delivered),
  rules 2-3 and 6-7 (:func:`~trio_agents.testing.check_invariants`), rule 5 (no agent still
  running), rule 6's error events and exception types, and the plugin hooks (exactly one of
  ``after_run`` / ``on_run_error``, last; ``on_event`` once per delivered event);
* the workflow rules, through a reference run of the tree: R-SEQ-1/2, R-PAR-1, R-PAR-3, R-PAR-6,
  R-LOOP-1/2/3, R-XFER-3.

Fast profile in CI; ``TRIO_AGENTS_FUZZ_EXAMPLES=N`` runs N examples (see ``profile.py``).

R-PAR-6 is checked strictly: once a direct child's escalation is committed, no event of another
branch follows it (the parallel agent's watcher runs in the committing task, before the Runner
takes the next event).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, note, settings, strategies as st

from tests.fuzz.profile import FAST, LONG_EXAMPLES, counter, run_long
from trio_agents import ParallelAgent
from trio_agents.testing import (
    Application,
    ScriptedAgent,
    Stop,
    run_application,
    scheduler_seed,
)
from trio_agents.testing.strategies import Interleaving, applications, interleavings, stops

FAST_EXAMPLES = 400


def check(
    app: Application, stop: Stop, *, hooks: bool, interleaving: Interleaving | None = None
) -> None:
    """Run ``app`` once under a mock clock, stopped as ``stop`` says; assert no violation.
    With ``interleaving``, the run has its order and timing (sleeps and timeouts perturbed)."""
    scenario = functools.partial(run_application, app, stop, record_hooks=hooks)
    if interleaving is not None:
        run = interleaving.run(scenario)
    else:
        run = trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))
    problems = app.violations(run)
    assert not problems, "\n".join([*problems, f"error: {run.error!r}"])


def _example(app: Application, stop: Stop, interleaving: Interleaving, hooks: bool) -> None:
    counter["examples"] += 1
    note(f"{app.describe()}\n{stop!r} {interleaving!r} hooks={hooks}")
    check(app, stop, hooks=hooks, interleaving=interleaving)


def _fuzz_test(config: settings) -> Any:
    return config(
        given(
            app=applications(),
            stop=stops(),
            interleaving=interleavings(),
            hooks=st.booleans(),
        )(_example)
    )


@pytest.mark.skipif(LONG_EXAMPLES > 0, reason="the long profile runs test_long_profile")
def test_random_applications_keep_every_rule() -> None:
    """ARCHITECTURE §2 rules 1-7, R-SEQ-2, R-PAR-3, R-PAR-6, R-LOOP-2, R-LOOP-3, R-XFER-3."""
    _fuzz_test(settings(FAST, max_examples=FAST_EXAMPLES))()


@pytest.mark.skipif(LONG_EXAMPLES == 0, reason="set TRIO_AGENTS_FUZZ_EXAMPLES to run it")
def test_long_profile() -> None:
    """The same properties for TRIO_AGENTS_FUZZ_EXAMPLES generated applications."""
    assert run_long("applications", _fuzz_test) >= LONG_EXAMPLES


def _escalating_parallel() -> Application:
    return Application(
        ParallelAgent(
            name="par",
            sub_agents=[
                ScriptedAgent(name="a", script=["escalate"]),
                ScriptedAgent(name="b", script=["emit", "emit"]),
                ScriptedAgent(name="c", script=["emit", "emit"]),
            ],
        )
    )


def test_nothing_follows_a_direct_childs_escalation_r_par_6() -> None:
    """The escalating event is the last of the parallel agent under every interleaving tried."""
    app = _escalating_parallel()
    for seed in range(200):
        with scheduler_seed(seed):
            check(app, Stop(), hooks=False)
