"""Exploring timing: every sleep and timeout of a Trio run lasts a drawn multiple of its length.

Reordering the tasks that are ready together cannot move a task that sleeps ten times longer
ahead of another: a bug that shows only when the slow branch finishes first is out of reach of
the scheduler alone. :class:`PerturbedTiming` reaches it: a Trio instrument that moves each
deadline set during the run, a ``trio.sleep``, a ``move_on_after``, a ``fail_after`` or any
cancel scope's deadline, to ``now + (deadline - now) * factor``, each factor drawn from
``random.Random(seed)``, log-uniformly between ``1 / spread`` and ``spread``. The draws follow
the order in which the run sets its deadlines, which the scheduler's seed fixes, so one seed
replays both the order and the timing (of the same code: a change that adds a sleep or a
checkpoint moves every later draw).

Hang guards are timeouts too: a ``fail_after(t)`` inside the run may fire after ``t / spread``
virtual seconds. Give such guards room (over ``spread ** 2`` times the longest wait they
guard), or set them outside the run.
"""

from __future__ import annotations

import importlib
import math
import random
import weakref
from typing import Any

import trio

__all__ = ["DEFAULT_SPREAD", "PerturbedTiming", "perturb_deadlines"]

DEFAULT_SPREAD = 10.0
"""How much a sleep or timeout may shrink or stretch by default: up to ten times either way."""


def check_spread(spread: float | None) -> None:
    if spread is not None and (
        isinstance(spread, bool) or not isinstance(spread, int | float) or not spread >= 1
    ):
        raise ValueError(f"timing must be a number >= 1 or None, got {spread!r}")


class PerturbedTiming(trio.abc.Instrument):
    """A Trio instrument that, from the start of its run, stretches or shrinks every sleep and
    timeout by a factor drawn from ``random.Random(seed)`` (between ``1 / spread`` and
    ``spread``). Pair it with a virtual clock, so the stretched sleeps cost nothing::

        trio.run(
            scenario,
            clock=trio.testing.MockClock(autojump_threshold=0),
            instruments=[PerturbedTiming(seed=7)],
        )

    An instrument serves one run.
    """

    def __init__(self, seed: int, *, spread: float = DEFAULT_SPREAD) -> None:
        check_spread(spread)
        self.seed = seed
        self.spread = float(spread)

    def __repr__(self) -> str:
        return f"PerturbedTiming(seed={self.seed}, spread={self.spread})"

    def before_run(self) -> None:
        """Trio instrument hook: perturb the deadlines of the run about to start."""
        perturb_deadlines(self.seed, self.spread)


def perturb_deadlines(seed: int, spread: float) -> None:
    """From now on in the current Trio run, stretch or shrink every new deadline by a factor
    drawn from ``random.Random(seed)`` (see the module docstring)."""
    check_spread(spread)
    runner = _current_runner()
    if isinstance(runner.deadlines, _PerturbedDeadlines):
        raise RuntimeError("this Trio run's deadlines are already perturbed")
    runner.deadlines = _PerturbedDeadlines(runner, random.Random(seed), float(spread))


def _current_runner() -> Any:
    """Trio's run loop: it keeps the deadlines of the run's cancel scopes."""
    run_module: Any = importlib.import_module("trio._core._run")
    runner = getattr(getattr(run_module, "GLOBAL_RUN_CONTEXT", None), "runner", None)
    if runner is None:
        raise RuntimeError("perturb_deadlines must be called inside a Trio run")
    if not hasattr(runner, "deadlines") or not hasattr(runner.deadlines, "add"):
        raise RuntimeError(
            "this Trio version keeps its deadlines elsewhere; timing cannot be explored with it"
        )
    return runner


class _PerturbedDeadlines:
    """Trio's deadline heap, with each deadline moved as it is registered.

    Trio registers a scope's deadline again when the scope changes (entered, shielded, its
    deadline set): the same deadline keeps the same moved value, a new deadline draws anew.
    """

    def __init__(self, runner: Any, rng: random.Random, spread: float) -> None:
        self._inner = runner.deadlines
        self._clock = runner.clock
        self._rng = rng
        self._log_spread = math.log(spread)
        self._moved: weakref.WeakKeyDictionary[Any, tuple[float, float]] = (
            weakref.WeakKeyDictionary()
        )

    def add(self, deadline: float, cancel_scope: Any) -> None:
        target = self._target(deadline, cancel_scope)
        cancel_scope._registered_deadline = target  # what Trio compares its heap entries with
        self._inner.add(target, cancel_scope)

    def _target(self, deadline: float, cancel_scope: Any) -> float:
        known = self._moved.get(cancel_scope)
        if known is not None and known[0] == deadline:
            return known[1]
        now = self._clock.current_time()
        target = deadline
        if now < deadline < math.inf:
            factor = math.exp(self._rng.uniform(-self._log_spread, self._log_spread))
            target = now + (deadline - now) * factor
        self._moved[cancel_scope] = (deadline, target)
        return target

    def __getattr__(self, name: str) -> Any:  # remove, next_deadline, expire: Trio's own
        return getattr(self._inner, name)
