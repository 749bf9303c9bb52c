"""``trio-agents run``: targets, replay files, and the interactive chat through a real terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pexpect
import pytest

from trio_agents import ConfigurationError
from trio_agents._main import _without_click, main
from trio_agents.cli import load_agents

CHAT_APP = """
import trio
from trio_agents import BaseAgent, Content, Event

class Talker(BaseAgent):
    async def _run_async_impl(self, ctx):
        text = ctx.user_content.text
        if text == "slow":
            for i in range(200):
                chunk = Content.from_text(f"w{i} ", role="model")
                await ctx.emit(Event(partial=True, content=chunk))
                await trio.sleep(0.05)
        words = [f"{text}!", " said", " back"]
        for word in words:
            await ctx.emit(Event(partial=True, content=Content.from_text(word, role="model")))
        await ctx.emit(Event(content=Content.from_text("".join(words), role="model")))

root_agent = Talker(name="talker")
"""


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    for name, body in [("alpha", CHAT_APP), ("beta", CHAT_APP.replace("talker", "other"))]:
        package = tmp_path / "apps" / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "agent.py").write_text(textwrap.dedent(body))
    (tmp_path / "apps" / "not_an_app").mkdir()
    return tmp_path / "apps"


def test_a_directory_target_holds_one_app_per_package(app_dir: Path) -> None:
    apps = load_agents(str(app_dir))
    assert {name: agent.name for name, agent in apps.items()} == {
        "alpha": "talker",
        "beta": "other",
    }


def test_an_empty_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no agent packages"):
        load_agents(str(tmp_path))


def test_run_picks_an_app_of_a_directory(app_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    assert main(["run", str(app_dir), "--app", "beta", "-m", "hi"], out=out) == 0
    assert "other" in out.getvalue()
    assert main(["run", str(app_dir), "-m", "hi"], out=io.StringIO()) == 2
    assert "choose one with --app" in capsys.readouterr().err


def test_run_replays_a_file_of_messages(app_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "messages.txt"
    script.write_text("one\n\ntwo\n")
    out = io.StringIO()
    assert main(["run", str(app_dir), "--app", "alpha", "--replay", str(script)], out=out) == 0
    finals = [line.strip() for line in out.getvalue().splitlines() if "said back" in line]
    assert finals == ["'one! said back'", "'two! said back'"]


def test_the_demo_runs_without_the_cli_extra() -> None:
    out = io.StringIO()
    assert _without_click(["demo", "workflow"], out) == 0
    assert "publisher" in out.getvalue()
    assert _without_click(["run", "x"], io.StringIO()) == 2


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_interactive_chat_streams_and_ctrl_c_cancels_only_the_run(app_dir: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(app_dir), "NO_COLOR": "1", "TERM": "dumb"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "trio_agents", "run", "alpha:root_agent"],
        env=env,
        encoding="utf-8",
        timeout=30,
    )
    try:
        child.expect("you> ")
        child.sendline("hello")
        child.expect(r"talker: hello! said back")
        child.expect("you> ")
        child.sendline("slow")
        child.expect(r"w3 ")  # streamed text is arriving
        child.sendintr()  # Ctrl-C cancels this run only
        child.expect(r"\[cancelled; the session keeps what was committed\]")
        child.expect("you> ")
        child.sendline("again")
        child.expect(r"talker: again! said back")
        child.expect("you> ")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_python_dash_m_demo_needs_no_cli_extra() -> None:
    """The entry point imports nothing of click/rich until a command needs them."""
    code = (
        "import builtins, io, sys\n"
        "real = builtins.__import__\n"
        "def blocked(name, *args, **kwargs):\n"
        "    if name.split('.')[0] in ('click', 'rich'):\n"
        "        raise ImportError(name)\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = blocked\n"
        "from trio_agents._main import main\n"
        "out = io.StringIO()\n"
        "ok = main(['demo', 'workflow'], out) == 0 and 'publisher' in out.getvalue()\n"
        "sys.exit(0 if ok else 1)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
