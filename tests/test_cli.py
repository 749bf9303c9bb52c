"""The command line and the built-in demo (``python -m trio_agents demo``)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trio_agents import App, Content, Event, InMemoryRunner, Part, ResumabilityConfig
from trio_agents._demo import assistant_app, workflow_app
from trio_agents._main import main
from trio_agents.models import register_model
from trio_agents.testing import ScriptedModel


def _run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out=out)
    return code, out.getvalue()


def _entries(output: str) -> list[tuple[str, str | None, str]]:
    """Parse the timeline into (author, branch, details) triples."""
    entries: list[tuple[str, str | None, list[str]]] = []
    for line in output.splitlines():
        if head := re.fullmatch(r"\s*\d+  (\S+)(?:  \[(\S+)\])?", line):
            entries.append((head[1], head[2], []))
        elif entries and line.startswith(" " * 7):
            entries[-1][2].append(line.strip())
        elif entries:
            entries.append(("", None, []))  # anything else ends the entry
    return [(a, b, "\n".join(d)) for a, b, d in entries if a]


async def _run(
    app_factory: object, *messages: str, answer: dict[str, object] | None = None
) -> tuple[list[Event], dict[str, object]]:
    """Run the demo app (resumable, as the demo runs it); with ``answer``, answer each pause."""
    app = App("demo", app_factory(), resumability_config=ResumabilityConfig(is_resumable=True))  # type: ignore[operator]
    runner = InMemoryRunner(app=app)
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    events: list[Event] = []
    pending: list[Content | str] = list(messages)
    while pending:
        message = pending.pop(0)
        async with runner.run(user_id="u", session_id=session.id, new_message=message) as stream:
            events.extend([e async for e in stream])
        if answer is not None and stream.paused:
            parts = [
                Part.from_function_response(c.name, answer, id=c.id) for c in stream.waiting_for
            ]
            pending.insert(0, Content(role="user", parts=parts))
    stored = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=session.id
    )
    assert stored is not None
    return events, dict(stored.state)


async def test_workflow_demo_fans_out_refines_and_publishes() -> None:
    """R-PAR-2 branches, R-LOOP-2 escalate ends the loop, R-SEQ-1 order."""
    events, state = await _run(workflow_app, "go", answer={"approved": True, "by": "Bo"})
    said = [e for e in events if e.content is not None]  # checkpoints aside
    authors = [e.author for e in said]
    assert set(authors[:3]) == {"weather", "news", "markets"}
    assert {e.branch for e in said[:3]} == {"gather.weather", "gather.news", "gather.markets"}
    assert authors[3:] == ["drafter", "critic"] * 3 + ["sign_off", "sign_off", "publisher"]
    assert said[-2].text == "Signed off by Bo."  # the pipeline paused, then resumed there
    assert events[-1].author == "pipeline" and events[-1].actions.end_of_agent
    assert [bool(e.actions.escalate) for e in events].count(True) == 1
    assert state["draft_version"] == 3
    assert state["published"] is True
    assert state["notes"] == ["add a headline", "cite sources"]
    assert str(state["draft"]).startswith("Briefing v3")


async def test_assistant_demo_uses_tools_transfers_and_waits_for_a_human() -> None:
    events, state = await _run(
        assistant_app, "Weather in Paris, and what is 6 times 7?", "I need a refund of 30 euros."
    )
    final = [e for e in events if e.is_final_response()]
    assert final[0].text == "It is sunny in Paris; the calculator says 42."
    assert state["last_answer"] == final[0].text
    transfer = [e.actions.transfer_to_agent for e in events if e.actions.transfer_to_agent]
    assert transfer == ["billing"]
    (waiting,) = [e for e in events if e.long_running_tool_ids]
    assert waiting.author == "billing"
    (request,) = waiting.get_function_calls()
    assert request.name == "adk_request_confirmation"
    assert request.args["originalFunctionCall"]["args"] == {"amount": 30.0}


def test_demo_command_prints_both_timelines_and_final_state() -> None:
    code, output = _run_cli("demo", "--in-memory")
    assert code == 0
    entries = _entries(output)
    authors = [author for author, _, _ in entries]
    assert len([d for a, _, d in entries if a == "drafter" and "Briefing" in d]) == 3
    assert authors[-1] == "billing"
    assert "(the pipeline paused; an editor signs the draft off)" in output
    assert "'Signed off by the editor.'" in output
    assert ("news", "gather.news") in {(a, b) for a, b, _ in entries}
    assert "escalate" in output
    assert "transfer to billing" in output
    assert "waiting for an answer (long-running tool)" in output
    assert "'Refund issued.'" in output
    assert output.count("final state:") == 2
    assert "  published = true" in output


def test_demo_command_runs_only_the_named_demo() -> None:
    code, output = _run_cli("demo", "assistant", "--in-memory")
    assert code == 0
    assert "== assistant" in output
    assert "== workflow" not in output


def test_demo_command_rejects_an_unknown_demo(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


@pytest.fixture
def agent_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "cli_target_app.py").write_text(
        textwrap.dedent(
            """
            from trio_agents import BaseAgent, Content, Event

            class Echo(BaseAgent):
                async def _run_async_impl(self, ctx):
                    text = ctx.user_content.text
                    await ctx.emit(Event(content=Content.from_text(text.upper(), role="model")))

            root_agent = Echo(name="echo")
            not_an_agent = 42
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "cli_target_app"


def test_run_command_runs_an_agent_on_each_message(agent_module: str) -> None:
    code, output = _run_cli("run", agent_module, "-m", "hello", "-m", "again")
    assert code == 0
    assert [(a, d.strip()) for a, _, d in _entries(output)] == [
        ("echo", "'HELLO'"),
        ("echo", "'AGAIN'"),
    ]


def test_run_command_reads_messages_from_stdin(
    agent_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("one\n\ntwo\n"))
    code, output = _run_cli("run", f"{agent_module}:root_agent")
    assert code == 0
    assert [d.strip() for _, _, d in _entries(output)] == ["'ONE'", "'TWO'"]


@pytest.mark.parametrize(
    ("suffix", "message"),
    [
        (":not_an_agent", "'not_an_agent' is not a trio_agents agent or app (got int)"),
        (":missing", "module 'cli_target_app' has no attribute 'missing'"),
    ],
)
def test_run_command_names_a_target_that_is_not_an_agent(
    agent_module: str, suffix: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = _run_cli("run", agent_module + suffix, "-m", "x")
    assert code == 1
    err = capsys.readouterr().err
    assert f"error: ConfigurationError: {agent_module + suffix!r}: {message}\n" == err


def test_run_command_reports_a_missing_module(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _run_cli("run", "no_such_module_here", "-m", "x")
    assert code == 1
    assert "no_such_module_here" in capsys.readouterr().err


def test_python_dash_m_entry_point_runs_the_demo() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trio_agents", "demo", "workflow", "--in-memory"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "publisher" in result.stdout


def test_assistant_demo_uses_the_model_named_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 5: a configured provider replaces the offline model; the demo copes with any answer."""
    seen: list[str] = []

    def factory(name: str) -> ScriptedModel:
        seen.append(name)
        return ScriptedModel(lambda request: "No tools today.", model=name)

    register_model(r"demo-env-test/.+", factory)
    monkeypatch.setenv("TRIO_AGENTS_DEMO_MODEL", "demo-env-test/m1")
    code, output = _run_cli("demo", "assistant", "--in-memory")
    assert code == 0
    assert "model: demo-env-test/m1" in output
    assert seen == ["demo-env-test/m1"]  # only the concierge ever ran
    assert output.count("'No tools today.'") == 2
    assert "(the model did not ask for an approval)" in output


def test_the_demo_persists_and_a_second_run_continues(tmp_path: Path) -> None:
    """Issue 7: sessions live in a SQLite file; running again continues them and remembers."""
    db = str(tmp_path / "demo.db")
    code, first = _run_cli("demo", "--db", db)
    assert code == 0
    assert first.count("new session 'demo'") == 2
    code, second = _run_cli("demo", "--db", db)
    assert code == 0
    assert "continuing session 'demo'" in second
    assert 'user: state {"user:last_city": "Paris"}' in second
    assert 'memory: user said "I\'d like a refund of 30 euros."' in second  # SQLite memory
    assert "draft_version = 4" in second  # the loop picked up where the last run stopped
    before = [int(n) for n in re.findall(r"stored events: (\d+)", first)]
    after = [int(n) for n in re.findall(r"stored events: (\d+)", second)]
    assert before == [39, 16]
    assert after[0] > 39 and after[1] > 16  # the same sessions, continued
    for output, stored in [(first, before), (second, after)]:  # numbers: places in the history
        demos = output.split("== ")[1:]
        last = [int(re.findall(r"^\s*(\d+)  \S", d, re.MULTILINE)[-1]) for d in demos]
        assert last == stored
    assert second.count("memory: billing said") <= 1  # no repeats, however often it was filed
    assert (
        '(function response: adk_request_confirmation -> {"confirmed": true, "payload": "Ana"})'
        in first
    )
    # routing: the assistant's next turn first goes to billing, who was talking (R-XFER-8)
    assert "transfer to concierge" in second
