"""The README's Python examples run as written."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
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


TESTING = README.read_text().split("## Testing your agents", 1)[1].split("\n## ", 1)[0]
TESTING_EXAMPLES = re.findall(r"```python\n(.*?)```", TESTING, re.S)
TESTING_CONFIG = re.findall(r"```toml\n(.*?)```", TESTING, re.S)


def test_the_testing_section_shows_its_pytest_configuration_and_examples() -> None:
    assert TESTING_CONFIG == ["[tool.pytest.ini_options]\ntrio_mode = true\n"]
    assert len(TESTING_EXAMPLES) >= 3
    assert all(example in EXAMPLES for example in TESTING_EXAMPLES)  # each runs above


def _pytest_in(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "source",
    [e for e in TESTING_EXAMPLES if "async def test_" in e],
    ids=lambda source: re.findall(r"async def (test_\w+)", source)[0],
)
def test_the_testing_sections_async_examples_pass_under_pytest_with_its_configuration(
    source: str, tmp_path: Path
) -> None:
    """As a user runs them: a project holding the section's configuration and the example as a
    test file, under pytest in a process of its own (without the configuration, they fail)."""
    (tmp_path / "test_example.py").write_text(source)
    bare = _pytest_in(tmp_path)
    assert bare.returncode != 0, bare.stdout
    (tmp_path / "pyproject.toml").write_text(TESTING_CONFIG[0])
    configured = _pytest_in(tmp_path)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    tests = len(re.findall(r"^(?:async )?def test_", source, re.M))
    assert f"{tests} passed" in configured.stdout


def test_the_testing_sections_long_fuzzing_command_runs() -> None:
    """The long-profile command, as shown, with a small number of applications."""
    (command,) = re.findall(r"```\n(TRIO_AGENTS_FUZZ_EXAMPLES=.*)\n```", TESTING)
    setting, python, *args = command.split()
    assert python == ".venv/bin/python" and args[:3] == ["-m", "pytest", "tests/fuzz"]
    name = setting.split("=")[0]
    done = subprocess.run(
        [sys.executable, *args, "-q"],
        cwd=README.parent,
        env={**os.environ, name: "20"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout  # the fast profile gives way to the long one
