"""LoggingPlugin: one structured line per hook, no content bodies unless asked."""

from __future__ import annotations

import logging

import pytest

from tests.plugins.helpers import HOOKS, Recorder, Run, fc, reply
from trio_agents import LlmAgent
from trio_agents.plugins import LoggingPlugin
from trio_agents.testing import ScriptedModel

LOGGER = "test.trio_agents.logging"

SECRETS = ("secret-user", "secret-model", "secret-arg", "secret-result")


def lookup(q: str) -> dict[str, str]:
    return {"answer": "secret-result"}


def boom() -> None:
    raise RuntimeError("tool exploded")


def app() -> LlmAgent:
    model = ScriptedModel([fc("lookup", {"q": "secret-arg"}), reply("secret-model")])
    return LlmAgent(name="a", model=model, tools=[lookup, boom])


def records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER]


async def test_one_line_per_hook_in_hook_order(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder("recorder")
    plugin = LoggingPlugin(logger=LOGGER)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    run = Run(app(), plugin, recorder)
    await run.send("secret-user")
    await run.runner.close()
    assert [r.hook for r in records(caplog)] == [hook for hook, _ in recorder.calls]  # type: ignore[attr-defined]
    assert {r.hook for r in records(caplog)} <= set(HOOKS)  # type: ignore[attr-defined]
    for record in records(caplog):
        assert record.getMessage().split(" ", 1)[0] == record.hook  # type: ignore[attr-defined]
        assert record.levelno == logging.INFO


async def test_no_content_bodies_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    await Run(app(), LoggingPlugin(logger=LOGGER)).send("secret-user")
    text = "\n".join(f"{r.getMessage()} {r.fields}" for r in records(caplog))  # type: ignore[attr-defined]
    for secret in SECRETS:
        assert secret not in text
    # What is there: ids, names and shapes.
    by_hook = {r.hook: r.fields for r in records(caplog)}  # type: ignore[attr-defined]
    assert by_hook["before_tool"]["tool"] == "lookup"
    assert by_hook["before_tool"]["agent"] == "a"
    assert by_hook["before_tool"]["call_id"]
    assert by_hook["before_model"]["model"] == "scripted"
    assert by_hook["before_model"]["tools"] == ["lookup", "boom"]
    assert by_hook["on_user_message"]["parts"] == 1
    assert by_hook["after_run"]["invocation_id"].startswith("e-")


async def test_content_bodies_when_asked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    await Run(app(), LoggingPlugin(logger=LOGGER, include_content=True)).send("secret-user")
    by_hook: dict[str, list[dict[str, object]]] = {}
    for record in records(caplog):
        by_hook.setdefault(record.hook, []).append(record.fields)  # type: ignore[attr-defined]
    assert by_hook["on_user_message"][0]["text"] == "secret-user"
    assert "secret-arg" in str(by_hook["before_tool"][0]["args"])
    assert "secret-result" in str(by_hook["after_tool"][0]["result"])
    assert by_hook["after_model"][-1]["text"] == "secret-model"
    assert "secret-user" in str(by_hook["before_model"][0]["request"])
    text = "\n".join(r.getMessage() for r in records(caplog))
    for secret in SECRETS:
        assert secret in text


async def test_content_is_cut_to_max_content_chars(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    plugin = LoggingPlugin(logger=LOGGER, include_content=True, max_content_chars=5)
    await Run(LlmAgent(name="a", model=ScriptedModel(["ok"])), plugin).send("abcdefghij")
    (message,) = [r for r in records(caplog) if r.hook == "on_user_message"]  # type: ignore[attr-defined]
    assert message.fields["text"] == "abcde…"  # type: ignore[attr-defined]


async def test_error_hooks_log_at_error_level_with_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    agent = LlmAgent(name="a", model=ScriptedModel([fc("boom")]), tools=[boom])
    with pytest.raises(RuntimeError):
        await Run(agent, LoggingPlugin(logger=LOGGER, error_level=logging.ERROR)).send()
    errors = [r for r in records(caplog) if r.levelno == logging.ERROR]
    assert [r.hook for r in errors] == ["on_tool_error", "on_agent_error", "on_run_error"]  # type: ignore[attr-defined]
    for record in errors:
        assert record.fields["error_type"] == "RuntimeError"  # type: ignore[attr-defined]
        assert record.fields["error"] == "tool exploded"  # type: ignore[attr-defined]
    assert 'error="tool exploded"' in errors[0].getMessage()


async def test_nothing_is_logged_below_the_logger_level(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    await Run(app(), LoggingPlugin(logger=LOGGER)).send()
    assert records(caplog) == []


async def test_message_is_logfmt(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    plugin = LoggingPlugin(logger=logging.getLogger(LOGGER), include_content=True)
    await Run(LlmAgent(name="a", model=ScriptedModel(['say "hi" = ok'])), plugin).send()
    (event,) = [r for r in records(caplog) if r.hook == "on_event"]  # type: ignore[attr-defined]
    message = event.getMessage()
    assert message.startswith("on_event invocation_id=e-")
    assert "author=a" in message
    assert "final=true" in message
    assert 'text="say \\"hi\\" = ok"' in message
