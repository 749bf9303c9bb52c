"""The benchmarks keep working: quick mode in a subprocess, checks on, timings never asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks._harness import CheckFailed, measure
from benchmarks._report import main_table
from benchmarks._targets import TARGETS, evaluate
from tests.bench_runs import run_module

RESULT_KEYS = {"workload", "case", "impl", "primary", "params", "metrics", "notes"}


def test_quick_workers_run_their_workloads_with_checks_on(tmp_path: Path) -> None:
    """W1 (round trip), W6 (in-memory and SQLite history) and W8 (cancellation) on trio_agents."""
    out = tmp_path / "ta.json"
    done = run_module("benchmarks._worker", "trio_agents", "--quick", "--only", "W1,W6,W8",
                "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())["results"]
    assert all(set(r) == RESULT_KEYS for r in results)
    assert {(r["workload"], r["case"]) for r in results} == {
        ("W1", "n=100"),
        ("W6", "memory n=300"),
        ("W6", "sqlite n=100"),
        ("W8", "k=10"),
    }
    w1 = next(r for r in results if r["workload"] == "W1")
    assert len(w1["metrics"]["us_per_event"]["samples"]) == 5
    w8 = next(r for r in results if r["workload"] == "W8")
    assert w8["metrics"]["unstopped_at_return"]["max"] == 0  # structured concurrency, not speed


def test_one_command_joins_floors_and_trio_agents_and_writes_the_report(tmp_path: Path) -> None:
    done = run_module("benchmarks", "--quick", "--only", "W1,W4", "--no-adk", "--no-charts",
                "--out", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| W1 | n=100 | us_per_event |" in done.stdout
    assert "`trio.chan`" in done.stdout
    assert "## Targets (docs/benchmarks/workloads.md)" in done.stdout
    assert done.stdout.startswith("# Benchmarks")
    assert "**Smoke run (`--quick`)**" in done.stdout
    targets = done.stdout.split("## Targets")[1].split("## More metrics")[0]
    rows = [line for line in targets.splitlines() if line.startswith("| W")]
    assert rows
    assert all(row.endswith("| not measured |") for row in rows)
    assert "❌" not in targets
    assert "✅" not in targets
    data = json.loads((tmp_path / "latest.json").read_text())
    impls = {(r["workload"], r["impl"]) for r in data["results"]}
    assert {("W1", "trio_agents"), ("W1", "trio.chan"), ("W1", "trio.gen")} <= impls
    assert {("W4", "trio_agents"), ("W4", "trio.chan")} <= impls
    assert (tmp_path / "latest.md").read_text().startswith("# Benchmarks")


def test_a_failing_check_aborts_the_benchmark() -> None:
    async def wrong() -> dict[str, float]:
        from benchmarks._harness import check

        check(False, "W0: 1 event seen, expected 2")
        return {"us": 1.0}

    def loop(sample):  # a loop that just drives the coroutine to completion
        coroutine = sample()
        try:
            coroutine.send(None)
        except StopIteration as stop:
            return stop.value
        raise AssertionError("the sample awaited something")

    with pytest.raises(CheckFailed, match="expected 2"):
        measure("W0", "n=2", "x", "us", {}, wrong, loop=loop)


def _result(workload: str, case: str, impl: str, value: float, **extra: float) -> dict:
    metrics = {"us": {"median": value, "min": value, "max": value}}
    metrics |= {k: {"median": v, "min": v, "max": v} for k, v in extra.items()}
    return {"workload": workload, "case": case, "impl": impl, "primary": "us", "params": {},
            "metrics": metrics, "notes": ""}  # fmt: skip


def test_targets_are_ratios_of_medians_from_onerun_module() -> None:
    results = [
        _result("W1", "n=1000", "trio_agents", 15.0),
        _result("W1", "n=1000", "trio.chan", 12.0),
        _result("W1", "n=1000", "google-adk", 90.0),
    ]
    verdicts = {target.text: (value, met) for target, value, met in evaluate(results)}
    assert verdicts["n=1000 per event vs trio.chan"] == (1.25, True)
    assert verdicts["ADK / ours at n=1000"] == (6.0, True)
    assert verdicts["n=5000 per event vs n=100"] == (None, None)  # not measured
    assert len(verdicts) == len(TARGETS)
    row = next(line for line in main_table(results) if line.startswith("| W1 | n=1000"))
    assert "| 1.25x | 6.00x |" in row
