"""Fuzz profiles: a fast one for CI, a long one on demand.

``TRIO_AGENTS_FUZZ_EXAMPLES=100000 .venv/bin/python -m pytest tests/fuzz -s`` runs the long
profile: each fuzz test runs that many examples, in batches of :data:`BATCH` with their own
Hypothesis seeds (no example database), reporting progress on stderr.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, seed, settings

LONG_EXAMPLES = int(os.environ.get("TRIO_AGENTS_FUZZ_EXAMPLES") or 0)
"""Examples per fuzz test in the long profile (0: the fast profile)."""
BATCH = 2_000

FAST = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def run_long(name: str, make_test: Callable[[settings], Callable[[], Any]]) -> int:
    """Run the Hypothesis test ``make_test(settings)`` until :data:`LONG_EXAMPLES` examples ran.

    ``make_test`` builds a fresh ``@given`` test for the settings; it must count its examples in
    :data:`counter`. Returns how many examples ran.
    """
    counter["examples"] = 0
    started = time.monotonic()
    batch = 0
    while counter["examples"] < LONG_EXAMPLES:
        size = min(BATCH, LONG_EXAMPLES - counter["examples"])
        batch_settings = settings(
            FAST, max_examples=size, database=None, suppress_health_check=list(HealthCheck)
        )
        test = seed(batch)(make_test(batch_settings))
        test()
        batch += 1
        elapsed = time.monotonic() - started
        print(
            f"[fuzz {name}] {counter['examples']} examples, batch {batch}, {elapsed:.0f} s",
            file=sys.__stderr__,
            flush=True,
        )
    return counter["examples"]


counter: dict[str, int] = {"examples": 0}
