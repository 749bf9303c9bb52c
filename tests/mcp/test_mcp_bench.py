"""The MCP overhead benchmark keeps working (quick mode, answers checked, timings not asserted)."""

from __future__ import annotations

from pathlib import Path

from tests.bench_runs import run_quick


def test_mcp_overhead_benchmark_runs(tmp_path: Path) -> None:
    stdout, data = run_quick(
        "benchmarks.mcp_overhead", tmp_path / "mcp.json", out_option="--out", timeout=300
    )
    assert data["workload"] == "MCP warm tool call"
    assert data["bare_sdk_ms"] > 0
    assert data["trio_agents_ms"] > 0
    assert "overhead" in stdout
