"""scheduler_seed: replay one Trio scheduling order (an interleaving) by its seed."""

from __future__ import annotations

import contextlib
import importlib
import random
from collections.abc import Iterator
from typing import Any

__all__ = ["scheduler_seed"]


def _trio_scheduler_random() -> random.Random:
    """The ``random.Random`` that Trio's run loop uses to order runnable tasks."""
    run_module: Any = importlib.import_module("trio._core._run")
    scheduler: object = getattr(run_module, "_r", None)
    if not isinstance(scheduler, random.Random):
        raise RuntimeError(
            "this Trio version keeps its scheduler randomness elsewhere; "
            "scheduler_seed cannot replay interleavings with it"
        )
    return scheduler


@contextlib.contextmanager
def scheduler_seed(seed: int) -> Iterator[None]:
    """Run the Trio code inside the block under the interleaving numbered ``seed``.

    Inside the block, Trio's scheduler randomness and the :mod:`random` module are seeded with
    ``seed`` exactly as Hypothesis's ``st.random_module()`` seeds them, so the interleaving a fuzz
    test reported (``Interleaving(seed=N)``, or ``RandomSeeder(N)`` for a bare
    ``st.random_module()``) happens again::

        with scheduler_seed(1234):
            trio.run(scenario)

    Both generators get their previous state back on exit. Importing Hypothesis switches Trio's
    scheduler to its deterministic, shuffle-based mode (through Trio's Hypothesis plugin); this
    helper imports it when it is installed, so replays match what the fuzz tests explored.
    """
    with contextlib.suppress(ImportError):
        importlib.import_module("hypothesis")
    scheduler = _trio_scheduler_random()
    saved = scheduler.getstate(), random.getstate()
    scheduler.seed(seed)
    random.seed(seed)
    try:
        yield
    finally:
        scheduler.setstate(saved[0])
        random.setstate(saved[1])
