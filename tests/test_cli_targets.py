"""What a person types at a terminal: targets the way ADK projects lay them out, one-line errors.

Every test runs the installed ``trio-agents`` script as a subprocess, from the project's folder.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trio_agents import __version__

SCRIPT = str(Path(sys.executable).with_name("trio-agents"))

ECHO = """
from trio_agents import BaseAgent, Content, Event

class Echo(BaseAgent):
    async def _run_async_impl(self, ctx):
        text = ctx.user_content.text
        await ctx.emit(Event(content=Content.from_text(f"{NAME}: {text}", role="model")))

root_agent = Echo(name=NAME)
"""


def _agent(name: str) -> str:
    return textwrap.dedent(ECHO).replace("NAME", repr(name))


def _cli(
    cwd: Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [SCRIPT, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={**environment, **(env or {})},
    )


def _answers(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [line.strip() for line in result.stdout.splitlines() if line.startswith(" " * 7)]


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout
    lines = [line for line in result.stderr.splitlines() if "[INFO]" not in line]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project folder: a module, a single agent package and a folder of packages."""
    (tmp_path / "my_app.py").write_text(_agent("mine"))
    package = tmp_path / "agents" / "weather"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import agent\n")
    (package / "agent.py").write_text(_agent("weather"))
    no_init = tmp_path / "agents" / "greeter"  # ADK also accepts agent.py without __init__.py
    no_init.mkdir()
    (no_init / "agent.py").write_text(_agent("greeter"))
    (tmp_path / "apps.py").write_text(
        _agent("inner")
        + textwrap.dedent(
            """
            class App:  # the shape of an ADK 2.x App: a name and a root agent
                def __init__(self, name, root_agent):
                    self.name, self.root_agent = name, root_agent

            app = App("outer_app", root_agent)
            """
        )
    )
    return tmp_path


@pytest.mark.parametrize(
    ("target", "answer"),
    [
        ("my_app", "'mine: hi'"),
        ("my_app:root_agent", "'mine: hi'"),
        ("my_app.py", "'mine: hi'"),
        ("./my_app.py", "'mine: hi'"),
        ("./my_app.py:root_agent", "'mine: hi'"),
        ("agents/weather", "'weather: hi'"),
        ("agents/greeter", "'greeter: hi'"),
        ("apps", "'inner: hi'"),
    ],
)
def test_run_loads_the_target_forms_of_an_adk_project(
    project: Path, target: str, answer: str
) -> None:
    assert _answers(_cli(project, "run", target, "-m", "hi")) == [answer]


def test_a_file_target_loads_from_another_folder_with_its_siblings(project: Path) -> None:
    (project / "helper.py").write_text("GREETING = 'sibling import works'\n")
    (project / "uses_helper.py").write_text(
        _agent("h").replace("root_agent =", "from helper import GREETING\nroot_agent =")
    )
    elsewhere = project / "agents"
    assert _answers(_cli(elsewhere, "run", str(project / "uses_helper.py"), "-m", "x")) == [
        "'h: x'"
    ]


def test_an_app_object_names_the_app(project: Path) -> None:
    result = _cli(project, "run", "apps", "--app", "outer_app", "-m", "hi")
    assert _answers(result) == ["'inner: hi'"]
    picked = _cli(project, "run", "apps", "--app", "inner", "-m", "hi")
    assert "no app 'inner' in TARGET; it holds ['outer_app']" in picked.stderr


@pytest.mark.parametrize(("resumable", "checkpoints"), [(True, 1), (False, 0)])
def test_run_runs_a_real_app_with_its_resumability(
    tmp_path: Path, resumable: bool, checkpoints: int
) -> None:
    (tmp_path / "shop.py").write_text(
        _agent("clerk")
        + textwrap.dedent(
            f"""
            from trio_agents import App, ResumabilityConfig

            config = ResumabilityConfig(is_resumable={resumable})
            app = App(name="shop", root_agent=root_agent, resumability_config=config)
            """
        )
    )
    result = _cli(tmp_path, "run", "shop.py", "-m", "hi")
    assert _answers(result) == ["'clerk: hi'"] + ["checkpoint: finished"] * checkpoints


def test_a_folder_of_packages_holds_one_app_each(project: Path) -> None:
    result = _cli(project, "run", "agents", "--app", "greeter", "-m", "hi")
    assert _answers(result) == ["'greeter: hi'"]
    several = _cli(project, "run", "agents", "-m", "hi")
    assert several.returncode == 2
    assert "choose one with --app: ['greeter', 'weather']" in several.stderr


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            "nope",
            "error: ConfigurationError: 'nope': no module 'nope' (looked in {cwd!r} and on "
            "sys.path; a file is path/to/file.py, a package a directory)",
        ),
        ("./nope.py", "error: ConfigurationError: './nope.py': no file './nope.py'"),
        (
            "my_app:agent",
            "error: ConfigurationError: 'my_app:agent': module 'my_app' has no attribute 'agent'",
        ),
        (
            "empty",
            "error: ConfigurationError: 'empty': module 'empty' defines neither app nor root_agent",
        ),
        (
            "broken.py",
            "error: ConfigurationError: 'broken.py': importing it raised ZeroDivisionError: "
            "division by zero (broken.py, line 2)",
        ),
        (
            "typo",
            "error: ConfigurationError: 'typo': importing it raised SyntaxError: "
            "invalid syntax (typo.py, line 1)",
        ),
        (
            "needs_dep",
            "error: ConfigurationError: 'needs_dep': importing it raised ModuleNotFoundError: "
            "No module named 'not_installed_anywhere' (needs_dep.py, line 1)",
        ),
        (
            "agents/weather:root_agent",
            "error: ConfigurationError: 'agents/weather:root_agent': a directory target takes "
            "no ':attribute'",
        ),
        (
            "nothing_here",
            "error: ConfigurationError: 'nothing_here': no agent packages here or under it "
            "exposing app or root_agent (in __init__.py or agent.py)",
        ),
    ],
)
def test_every_target_error_is_one_line_naming_the_target(
    project: Path, target: str, message: str
) -> None:
    (project / "empty.py").write_text("x = 1\n")
    (project / "broken.py").write_text("import json\nvalue = 1 / 0\n")
    (project / "typo.py").write_text("def (:\n")
    (project / "needs_dep.py").write_text("import not_installed_anywhere\n")
    (project / "nothing_here").mkdir()
    error = _one_line_error(_cli(project, "run", target, "-m", "hi"))
    assert error == message.format(cwd=str(project))


def test_debug_adds_the_traceback(project: Path) -> None:
    (project / "broken.py").write_text("value = 1 / 0\n")
    result = _cli(project, "run", "broken", "-m", "hi", "--debug")
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("error: ConfigurationError: ")


def test_version(tmp_path: Path) -> None:
    result = _cli(tmp_path, "--version")
    assert (result.returncode, result.stdout) == (0, f"trio-agents {__version__}\n")


def test_a_port_in_use_is_one_line_naming_the_address(project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _cli(project, "api-server", "my_app", "--port", str(port))
    assert _one_line_error(result) == (
        f"error: ConfigurationError: cannot listen on 127.0.0.1:{port}: address already in use; "
        "another process listens there; pick another --port, or 0 for any free one"
    )


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            "redis://x",
            "error: ConfigurationError: unknown session service URI 'redis://x' "
            "(memory://, sqlite:///, postgresql://)",
        ),
        (
            "sqlite:///a_folder",
            "error: ConfigurationError: session service 'sqlite:///a_folder': cannot open the "
            "session database 'a_folder': unable to open database file",
        ),
    ],
)
def test_a_bad_session_store_fails_before_serving_on_one_line(
    project: Path, option: str, message: str
) -> None:
    (project / "a_folder").mkdir()
    result = _cli(project, "api-server", "my_app", "--port", "0", "--session-service", option)
    assert _one_line_error(result) == message
    assert "serving" not in result.stdout


def test_a_missing_extra_is_one_line(project: Path) -> None:
    block_starlette = (
        "import sys; sys.modules['starlette'] = None; "
        "from trio_agents._main import main; sys.exit(main())"
    )
    result = subprocess.run(
        [sys.executable, "-c", block_starlette, "web", "my_app"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: this command needs the 'server' extra (starlette is not installed): "
        "pip install 'trio_agents[server]'"
    ]


def test_adk_ui_without_google_adk_is_one_line(project: Path) -> None:
    hide_google = (
        "import sys; sys.modules['google'] = None; "
        "from trio_agents._main import main; sys.exit(main())"
    )
    result = subprocess.run(
        [sys.executable, "-c", hide_google, "web", "my_app", "--adk-ui", "--port", "0"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert _one_line_error(result) == (
        "error: ConfigurationError: ADK's dev UI comes with google-adk, which is not installed: "
        "pip install 'trio_agents[adk-ui]'"
    )


def test_a_continued_session_numbers_on_from_its_history(project: Path) -> None:
    store = ["--session-service", "sqlite:///chat.db", "--session-id", "s1"]
    first = _cli(project, "run", "my_app", "-m", "one", *store)
    second = _cli(project, "run", "my_app", "-m", "two", "-m", "three", *store)
    numbers = [re.findall(r"^\s*(\d+)  mine$", r.stdout, re.MULTILINE) for r in (first, second)]
    assert numbers == [["2"], ["4", "6"]]  # each user message takes a place too
