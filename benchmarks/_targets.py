"""The targets of ``docs/benchmarks/workloads.md``, evaluated on one run's results (never asserted).

Floor ratios are taken at each workload's headline case (W1 n=1000, W2 both cases, W3 K=1000,
W4 M=1000, W6 every size, W8 every K); "flat" means the large case costs at most the stated
factor times the small one per unit (1.3x where a target only says "flat").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Results = list[dict[str, Any]]
OURS, ADK, CHAN = "trio_agents", "google-adk", "trio.chan"


class Target:
    """One line of the targets table: a measured value, its limit and whether it holds."""

    def __init__(self, workload: str, text: str, measure: Callable[[Results], float | None],
                 limit: float, at_least: bool = False, unit: str = "x") -> None:  # fmt: skip
        self.workload = workload
        self.text = text
        self.measure = measure
        self.limit = limit
        self.at_least = at_least
        self.unit = unit

    def evaluate(self, results: Results) -> tuple[float | None, bool | None]:
        """(value, met); both None when a needed case was not measured in this run."""
        try:
            value = self.measure(results)
        except (KeyError, ZeroDivisionError):
            value = None
        if value is None:
            return None, None
        met = value >= self.limit if self.at_least else value <= self.limit
        return value, met

    def describe(self) -> str:
        sign = ">=" if self.at_least else "<="
        return f"{self.text} ({sign} {self.limit:g}{'' if self.unit == 'x' else ' '}{self.unit})"


def get(results: Results, workload: str, case: str, impl: str, metric: str | None = None) -> float:
    """The median of ``metric`` (default: the primary one); KeyError when not measured."""
    for r in results:
        if (r["workload"], r["case"], r["impl"]) == (workload, case, impl) and r["primary"]:
            name = metric or r["primary"]
            if name in r["metrics"]:
                return float(r["metrics"][name]["median"])
    raise KeyError((workload, case, impl, metric))


def _ratio(wl: str, case: str, num: str, den: str, metric: str | None = None) -> Callable[..., Any]:
    return lambda r: get(r, wl, case, num, metric) / get(r, wl, case, den, metric)


def _flat(wl: str, small: str, large: str, metric: str | None = None) -> Callable[..., Any]:
    return lambda r: get(r, wl, large, OURS, metric) / get(r, wl, small, OURS, metric)


def _value(wl: str, case: str, metric: str | None = None, scale: float = 1.0) -> Callable[..., Any]:
    return lambda r: get(r, wl, case, OURS, metric) * scale


def _per_child(impl: str) -> Callable[[Results], float]:
    """W2: (T(100, 10) - T(10, 100)) / 90, in microseconds."""

    def measure(r: Results) -> float:
        deep = get(r, "W2", "d=100 e=10", impl, "total_ms")
        shallow = get(r, "W2", "d=10 e=100", impl, "total_ms")
        return (deep - shallow) / 90 * 1e3

    return measure


def _per_child_vs_adk(r: Results) -> float:
    return _per_child(ADK)(r) / _per_child(OURS)(r)


def _kib_per(wl: str, case: str, impl: str, count: int) -> Callable[[Results], float]:
    return lambda r: get(r, wl, case, impl, "peak_mib") * 1024 / count


def _targets() -> list[Target]:
    t: list[Target] = []
    add = t.append
    add(Target("W1", "n=1000 per event vs trio.chan", _ratio("W1", "n=1000", OURS, CHAN), 1.5))
    add(Target("W1", "n=5000 per event vs n=100", _flat("W1", "n=100", "n=5000"), 1.3))
    add(Target("W1", "ADK / ours at n=1000", _ratio("W1", "n=1000", ADK, OURS), 4, True))
    add(Target("W1", "ADK / ours at n=5000", _ratio("W1", "n=5000", ADK, OURS), 15, True))
    for case in ("d=10 e=100", "d=100 e=10"):
        add(Target("W2", f"{case} per event vs trio.chan", _ratio("W2", case, OURS, CHAN), 1.5))
    add(Target("W2", "per child agent", _per_child(OURS), 60, unit="us"))
    for case in ("d=10 e=100", "d=100 e=10"):
        add(Target("W2", f"ADK / ours per event, {case}", _ratio("W2", case, ADK, OURS), 4, True))
    add(Target("W2", "ADK / ours per child agent", _per_child_vs_adk, 7, True))
    add(Target("W3", "k=1000 per event vs trio.chan", _ratio("W3", "k=1000 e=5", OURS, CHAN), 2))
    add(Target("W3", "heap per branch at k=1000", _kib_per("W3", "k=1000 e=5", OURS, 1000), 12,
               unit="KiB"))  # fmt: skip
    add(Target("W3", "k=1000 per event vs k=10", _flat("W3", "k=10 e=5", "k=1000 e=5"), 1.3))
    add(Target("W3", "ADK / ours at k=1000", _ratio("W3", "k=1000 e=5", ADK, OURS), 10, True))
    add(Target("W3", "ADK / ours heap at k=1000",
               _ratio("W3", "k=1000 e=5", ADK, OURS, "peak_mib"), 3, True))  # fmt: skip
    add(Target("W4", "m=1000 per iteration vs trio.chan", _ratio("W4", "m=1000", OURS, CHAN), 2))
    add(Target("W4", "m=1000 per iteration vs m=100", _flat("W4", "m=100", "m=1000"), 1.3))
    add(Target("W4", "ADK / ours at m=1000", _ratio("W4", "m=1000", ADK, OURS), 7, True))
    add(Target("W5", "per step at t=10", _value("W5", "t=10"), 300, unit="us"))
    add(Target("W5", "t=200 per step vs t=10", _flat("W5", "t=10", "t=200"), 1.5))
    add(Target("W5", "ADK / ours at t=10", _ratio("W5", "t=10", ADK, OURS), 20, True))
    add(Target("W5", "ADK / ours at t=200", _ratio("W5", "t=200", ADK, OURS), 50, True))
    for n in (1000, 5000, 10000):
        add(Target("W6", f"memory append at n={n}", _value("W6", f"memory n={n}"), 5, unit="us"))
    add(Target("W6", "one-event invocation on a 10k memory history",
               _value("W6", "memory n=10000", "invoke_ms"), 2, unit="ms"))  # fmt: skip
    add(Target("W6", "ADK / ours memory append at n=1000",
               _ratio("W6", "memory n=1000", ADK, OURS), 30, True))  # fmt: skip
    add(Target("W6", "ADK / ours invocation on a 10k memory history",
               _ratio("W6", "memory n=10000", ADK, OURS, "invoke_ms"), 300, True))  # fmt: skip
    for n in (500, 1000, 2000):
        add(Target("W6", f"sqlite append at n={n} vs trio.sqlite3-thread",
                   _ratio("W6", f"sqlite n={n}", OURS, "trio.sqlite3-thread"), 1.3))  # fmt: skip
    add(Target("W6", "sqlite append n=2000 vs n=500", _flat("W6", "sqlite n=500", "sqlite n=2000"),
               1.3))  # fmt: skip
    add(Target("W6", "ADK / ours sqlite append at n=1000",
               _ratio("W6", "sqlite n=1000", ADK, OURS), 2.5, True))  # fmt: skip
    add(Target("W7", "per invocation at s=1000",
               _value("W7", "s=1000 e=5", "us_per_invocation"), 500, unit="us"))  # fmt: skip
    add(Target("W7", "s=1000 per invocation vs s=100",
               _flat("W7", "s=100 e=5", "s=1000 e=5", "us_per_invocation"), 1.3))  # fmt: skip
    add(Target("W7", "heap per concurrent invocation at s=1000",
               _kib_per("W7", "s=1000 e=5", OURS, 1000), 15, unit="KiB"))  # fmt: skip
    add(Target("W7", "ours / ADK invocations per second at s=1000",
               _ratio("W7", "s=1000 e=5", OURS, ADK, "invocations_per_s"), 3, True))  # fmt: skip
    for k in (10, 100, 1000):
        add(Target("W8", f"k={k} latency vs trio.chan", _ratio("W8", f"k={k}", OURS, CHAN), 1.5))
        add(Target("W8", f"k={k} sibling events produced after the failure",
                   _value("W8", f"k={k}", "produced_after"), 0, unit="events"))  # fmt: skip
        add(Target("W8", f"k={k} siblings still running when the error surfaces",
                   _value("W8", f"k={k}", "unstopped_at_return"), 0, unit="tasks"))  # fmt: skip
    add(Target("W8", "ADK / ours latency at k=1000", _ratio("W8", "k=1000", ADK, OURS), 3, True))
    return t


TARGETS = _targets()


def evaluate(results: Results) -> list[tuple[Target, float | None, bool | None]]:
    """Every target with its measured value and verdict (None: not measured in this run)."""
    return [(target, *target.evaluate(results)) for target in TARGETS]
