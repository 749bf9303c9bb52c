"""Sampling rules of ``docs/benchmarks/workloads.md``, shared by every implementation.

Standard library only.

Each sample runs in a fresh event loop (``trio.run`` or ``asyncio.run``) after ``gc.collect()``;
the first case of a workload gets one untimed warm-up run; memory is measured in one more untimed
run under ``tracemalloc``, never together with a timing. A sample marks its timed window with
:class:`Window`, which also records the traced-heap peak of that window when ``tracemalloc`` is on.
This module must import under any interpreter (the google-adk worker runs in another virtualenv).
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any, Self

Sample = Callable[[], Awaitable[dict[str, float]]]
"""One run of a case: returns its metrics; raises :class:`CheckFailed` if its checks fail."""
LoopRunner = Callable[[Sample], dict[str, float]]
"""Runs a sample in a fresh event loop (``trio.run`` or ``asyncio.run`` adapted)."""
Result = dict[str, Any]
"""One case of one implementation, in the result-file shape of docs/benchmarks/workloads.md."""

SAMPLES = 5


class CheckFailed(AssertionError):
    """A correctness check of a workload failed: the benchmark is aborted."""


def check(condition: bool, message: str) -> None:
    """Abort the benchmark with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(f"benchmark check failed: {message}")


class Window:
    """The timed window of a sample: ``with Window() as w: ...`` then ``w.seconds``.

    Under ``tracemalloc`` it also records ``peak_bytes``: the traced-heap peak inside the window
    minus the heap size when it opened (kept in :data:`LAST_PEAK` for :func:`measure`).
    """

    __slots__ = ("_base", "_start", "peak_bytes", "seconds")

    def __enter__(self) -> Self:
        self.peak_bytes = 0
        self._base = 0
        if tracemalloc.is_tracing():
            self._base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.seconds = time.perf_counter() - self._start
        if tracemalloc.is_tracing():
            self.peak_bytes = tracemalloc.get_traced_memory()[1] - self._base
            LAST_PEAK[0] = self.peak_bytes


LAST_PEAK = [0]
"""The peak of the last :class:`Window` closed under ``tracemalloc``."""


def summary(values: list[float]) -> dict[str, Any]:
    """``{"median", "min", "max", "samples"}`` of a metric's samples."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "samples": values,
    }


def result(
    workload: str,
    case: str,
    impl: str,
    primary: str,
    params: dict[str, Any],
    metrics: dict[str, dict[str, Any]],
    notes: str = "",
) -> Result:
    """A result record (the shape docs/benchmarks/workloads.md asks every harness to write)."""
    return {
        "workload": workload,
        "case": case,
        "impl": impl,
        "primary": primary,
        "params": params,
        "metrics": metrics,
        "notes": notes,
    }


def measure(
    workload: str,
    case: str,
    impl: str,
    primary: str,
    params: dict[str, Any],
    sample: Sample,
    *,
    loop: LoopRunner,
    warm_up: bool = True,
    memory: bool = False,
    samples: int = SAMPLES,
    notes: str = "",
) -> Result:
    """Run ``sample`` ``samples`` times, each in a fresh loop after ``gc.collect()``.

    ``warm_up`` adds one untimed run first (the first case of each workload); ``memory`` adds one
    untimed run under ``tracemalloc`` whose window peak becomes ``peak_mib``.
    """
    if warm_up:
        loop(sample)
    runs: list[dict[str, float]] = []
    for _ in range(samples):
        gc.collect()
        runs.append(loop(sample))
    metrics = {name: summary([run[name] for run in runs]) for name in runs[0]}
    if memory:
        peak = traced_peak(sample, loop)
        metrics["peak_mib"] = summary([peak / 2**20])
    return result(workload, case, impl, primary, params, metrics, notes)


def traced_peak(sample: Sample, loop: LoopRunner) -> int:
    """The heap peak (bytes) of ``sample``'s window in one untimed run under ``tracemalloc``."""
    gc.collect()
    LAST_PEAK[0] = 0
    tracemalloc.start()
    try:
        loop(sample)
    finally:
        tracemalloc.stop()
    return LAST_PEAK[0]


def repeated(
    run_once: Callable[[], Awaitable[float]], min_seconds: float, metric: str, units: int
) -> Sample:
    """A sample that repeats a short floor case in one loop until it lasts ``min_seconds``.

    ``run_once`` returns its window in seconds; the sample reports the mean window divided by
    ``units``, in microseconds, as ``metric``.
    """

    async def sample() -> dict[str, float]:
        windows: list[float] = []
        while not windows or sum(windows) < min_seconds:
            windows.append(await run_once())
        return {metric: statistics.fmean(windows) / units * 1e6}

    return sample
