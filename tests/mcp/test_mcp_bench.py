"""The MCP overhead benchmark keeps working (quick mode, answers checked, timings not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT


def test_mcp_overhead_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "mcp.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.mcp_overhead", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["workload"] == "MCP warm tool call"
    assert data["bare_sdk_ms"] > 0
    assert data["trio_agents_ms"] > 0
    assert "overhead" in done.stdout
