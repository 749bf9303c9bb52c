"""The README's Python examples run as written."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import trio

README = Path(__file__).resolve().parent.parent / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("source", EXAMPLES, ids=[f"example-{i}" for i in range(len(EXAMPLES))])
def test_readme_example_runs(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(source, str(README), "exec"), namespace)
    for name, value in namespace.items():  # example tests are run too
        if name.startswith("test_") and inspect.iscoroutinefunction(value):
            trio.run(value)
    capsys.readouterr()
