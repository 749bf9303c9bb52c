"""Running a benchmark module in a subprocess, as the benchmark tests do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_module(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m *args`` from the project root, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_quick(
    module: str, out: Path, *extra: str, out_option: str = "--json", timeout: float = 300
) -> tuple[str, Any]:
    """``module --quick`` writing its results to ``out``: its standard output and the results
    (it must exit 0)."""
    done = run_module(module, "--quick", out_option, str(out), *extra, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, json.loads(out.read_text())
