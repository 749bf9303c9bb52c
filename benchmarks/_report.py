"""The joined table: trio_agents, its floor, trio.gen and google-adk side by side, with ratios."""

from __future__ import annotations

import re
from typing import Any

from benchmarks._targets import Target

Results = list[dict[str, Any]]
OURS, ADK, GEN = "trio_agents", "google-adk", "trio.gen"
COLUMNS = ("trio_agents", "floor", "trio.gen", "google-adk")


def floor_of(workload: str, case: str) -> str:
    """The floor each case is compared with: the channel pattern, or W6's append floors."""
    if workload == "W6":
        return "trio.commit" if case.startswith("memory") else "trio.sqlite3-thread"
    return "trio.chan"


def case_key(result: dict[str, Any]) -> tuple[int, str, tuple[Any, ...]]:
    """Sort by workload number, then case with its numbers compared as numbers."""
    parts = re.split(r"(\d+)", result["case"])
    return (
        int(result["workload"][1:]),
        parts[0],
        tuple(int(p) if p.isdigit() else p for p in parts),
    )


def _cell(result: dict[str, Any] | None, metric: str | None = None) -> str:
    if result is None or not result["primary"]:
        return "–"
    m = result["metrics"].get(metric or result["primary"])
    if m is None:
        return "–"
    if m["min"] == m["max"]:
        return _num(m["median"])
    return f"{_num(m['median'])} ({_num(m['min'])}–{_num(m['max'])})"


def _num(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _median(result: dict[str, Any] | None) -> float | None:
    if result is None or not result["primary"]:
        return None
    return float(result["metrics"][result["primary"]]["median"])


def _ratio(top: float | None, bottom: float | None) -> str:
    if top is None or bottom is None or bottom == 0:
        return "–"
    return f"{top / bottom:.2f}x"


def main_table(results: Results) -> list[str]:
    """One row per (workload, case): primary metric per implementation and the two ratios."""
    by_key: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    order: list[tuple[str, str]] = []
    for r in sorted(results, key=case_key):
        key = (r["workload"], r["case"])
        if key not in by_key:
            by_key[key] = {}
            order.append(key)
        by_key[key][r["impl"]] = r
    lines = [
        "| wl | case | metric | trio_agents | floor | trio.gen | google-adk "
        "| ours ÷ floor | ADK ÷ ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, case in order:
        row = by_key[workload, case]
        floor_impl = floor_of(workload, case)
        ours, floor, adk = row.get(OURS), row.get(floor_impl), row.get(ADK)
        present = [r for r in (ours, floor, adk, row.get(GEN)) if r is not None and r["primary"]]
        if not present:
            continue
        metric = present[0]["primary"]
        floor_cell = _cell(floor) if floor is None else f"{_cell(floor)} `{floor_impl}`"
        lines.append(
            f"| {workload} | {case} | {metric} | {_cell(ours)} | {floor_cell} "
            f"| {_cell(row.get(GEN))} | {_cell(adk)} "
            f"| {_ratio(_median(ours), _median(floor))} | {_ratio(_median(adk), _median(ours))} |"
        )
    return lines


def more_table(results: Results) -> list[str]:
    """Every metric not shown in the main table (secondary metrics, the other floors)."""
    main_impls = {OURS, ADK, GEN}
    lines = ["| wl | case | impl | metric | median | min | max |", "|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=case_key):
        shown_primary = r["impl"] in main_impls or r["impl"] == floor_of(r["workload"], r["case"])
        for name, m in r["metrics"].items():
            if name == r["primary"] and shown_primary:
                continue
            lines.append(
                f"| {r['workload']} | {r['case']} | {r['impl']} | {name} | {_num(m['median'])} "
                f"| {_num(m['min'])} | {_num(m['max'])} |"
            )
    return lines


SMOKE = (
    "**Smoke run (`--quick`)**: tiny sizes check that every workload runs and passes its checks. "
    'The figures are not measurements and no target is judged (every one reads "not '
    'measured"); run without `--quick` to measure.'
)


def targets_table(
    runs: list[list[tuple[Target, float | None, bool | None]]], *, judged: bool = True
) -> list[str]:
    """The targets with the value measured in each run and how many runs met them.

    Unless ``judged``, values are shown without a verdict: a smoke run measures nothing.
    """
    header = "| wl | target | " + " | ".join(f"run {i + 1}" for i in range(len(runs)))
    lines = [header + " | met |", "|---|---|" + "---|" * len(runs) + "---|"]
    for index, (target, _, _) in enumerate(runs[0]):
        cells, met, measured = [], 0, 0
        for run in runs:
            _, value, ok = run[index]
            if value is None:
                cells.append("–")
                continue
            measured += 1
            met += bool(ok)
            shown = f"{value:.2f}" if target.unit == "x" else _num(value)
            cells.append(f"{shown} {'✅' if ok else '❌'}" if judged else shown)
        verdict = f"{met}/{measured}" if measured and judged else "not measured"
        lines.append(
            f"| {target.workload} | {target.describe()} | {' | '.join(cells)} | {verdict} |"
        )
    return lines


def notes(results: Results) -> list[str]:
    return [
        f"- {r['workload']} {r['case']} {r['impl']}: {r['notes']}" for r in results if r["notes"]
    ]


def render(
    meta: dict[str, Any],
    results: Results,
    runs: list[list[tuple[Target, float | None, bool | None]]],
    charts: list[str],
    *,
    smoke: bool = False,
) -> str:
    """The Markdown report: machine, main table, targets, more metrics, charts.

    A ``smoke`` run (``--quick``) says so first and judges no target.
    """
    lines = ["# Benchmarks: trio_agents, the Trio floors and google-adk", ""]
    if smoke:
        lines += [SMOKE, ""]
    lines += [f"- {key}: {value}" for key, value in meta.items()]
    lines += ["", "## Results (medians of 5 samples, min–max in brackets; last run)", ""]
    lines += main_table(results)
    lines += [
        "",
        "Units: µs per event/iteration/step/append, ms for latency. `floor` is `trio.chan` "
        "(zero-buffer channel + per-event ack) except for W6 (`trio.commit`: list append + dict "
        "update; `trio.sqlite3-thread`: one connection, fsync). Ratios are of medians from this "
        "run: ours ÷ floor (lower is better), ADK ÷ ours (higher is better).",
        "",
        "## Targets (docs/benchmarks/workloads.md)",
        "",
    ]
    lines += targets_table(runs, judged=not smoke)
    extra = notes(results)
    if extra:
        lines += ["", "## Notes", "", *extra]
    lines += ["", "## More metrics", ""]
    lines += more_table(results)
    if charts:
        lines += ["", "## Charts", ""]
        lines += [f"![{name}]({name})" for name in charts]
    return "\n".join(lines) + "\n"
