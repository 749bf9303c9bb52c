"""The resume benchmark keeps working: quick mode in a subprocess, checks on, no timing asserted."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from benchmarks.resume import reads, table
from tests.bench_runs import run_quick


def _quick(tmp_path: Path, *extra: str) -> tuple[str, dict[str, Any]]:
    stdout, data = run_quick("benchmarks.resume", tmp_path / "resume.json", *extra, timeout=240)
    return stdout, data


def _summaries(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in row.values() if isinstance(v, dict)]


def test_quick_mode_resumes_on_memory_and_sqlite_warm_and_cold(tmp_path: Path) -> None:
    stdout, data = _quick(tmp_path, "--no-adk", "--stores", "memory,sqlite")
    rows = data["rows"]
    assert (data["events"], data["reps"]) == (200, 2)
    assert [(r["impl"], r["store"], r["mode"]) for r in rows] == [
        ("trio_agents", "memory", "warm"),
        ("trio_agents", "sqlite", "warm"),
        ("trio_agents", "sqlite", "cold"),
    ]
    for row in rows:
        assert row["history"] == 200
        for summary in _summaries(row):
            assert len(summary["samples"]) == 2
            assert summary["min"] <= summary["median"] <= summary["max"]
    cold = rows[-1]
    # The history, then 7 invocations (warm-up, 2 warm, 3 cold, the counted one) of 10 events:
    # the opening message, a checkpoint and the call; the answer and 6 events of the resume.
    assert cold["stored_events"] == 200 + 7 * 10
    assert 0 < cold["parsed_events"] <= cold["stored_events"]
    assert stdout.startswith("# Resume latency (200 events of history, 2 resumes per row)")
    assert table(rows) in stdout and reads(rows) in stdout


@pytest.mark.skipif(
    importlib.util.find_spec("google.adk") is None,
    reason="google-adk is not installed (pip install -e '.[bench]')",
)
def test_quick_mode_resumes_the_same_app_on_google_adk(tmp_path: Path) -> None:
    stdout, data = _quick(tmp_path, "--stores", "memory,sqlite")
    adk = [(r["store"], r["mode"]) for r in data["rows"] if r["impl"] == "google-adk"]
    assert adk == [("memory", "warm"), ("sqlite", "warm"), ("sqlite", "cold")]
    ratios = [line.rsplit("|", 2)[1].strip() for line in stdout.splitlines()
              if line.startswith("| trio_agents |")]  # fmt: skip
    assert len(ratios) == 3 and all(float(r) > 0 for r in ratios)
