"""The kit is light: importing it loads no Hypothesis and nothing trio_agents does not load."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import trio_agents
before = {name.split(".")[0] for name in sys.modules}
import trio_agents.testing
added = {name.split(".")[0] for name in sys.modules} - before
print(sorted(added - set(sys.stdlib_module_names)))
print("hypothesis" in sys.modules)
"""


def test_importing_the_kit_loads_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    added, hypothesis = done.stdout.split("\n")[:2]
    assert added == "[]"
    assert hypothesis == "False"
