"""``App`` and ``ResumabilityConfig``, and ``Runner(app=...)`` (R-APP-1).

An app names its root agent, its plugins and its settings; a Runner built from it takes the app
name and plugins from it. The agent-and-name form keeps working; mixing the two forms is refused.
The CLI and server loaders accept a real ``App`` the way they accept any object with a ``name``
and a ``root_agent``.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest

from trio_agents import (
    App,
    ConfigurationError,
    Content,
    Event,
    InvocationContext,
    LlmAgent,
    ResumabilityConfig,
    Runner,
)
from trio_agents.cli import load_agents, load_apps
from trio_agents.plugins import BasePlugin
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import ScriptedModel


def scripted(name: str = "assistant", *script: Any) -> LlmAgent:
    return LlmAgent(name=name, model=ScriptedModel(list(script) or ["hello"]))


class Seen(BasePlugin):
    """Records the authors of the events it is shown."""

    def __init__(self) -> None:
        super().__init__("seen")
        self.authors: list[str] = []

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        self.authors.append(event.author)
        return None


# -- App --------------------------------------------------------------------------------------


def test_app_defaults_and_fields() -> None:
    agent = scripted()
    app = App("shop", agent)
    assert (app.name, app.root_agent, app.plugins, app.resumability_config) == (
        "shop",
        agent,
        (),
        None,
    )
    assert not app.is_resumable
    resumable = App(
        name="shop", root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True)
    )
    assert resumable.is_resumable
    assert not App("shop", agent, resumability_config=ResumabilityConfig()).is_resumable
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        app.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize("name", ["", "1shop", "my shop", "shop!", "_shop", "user", "dé"])
def test_a_bad_app_name_is_refused_naming_it(name: str) -> None:
    with pytest.raises(ConfigurationError, match=f"invalid app name {name!r}"):
        App(name, scripted())


@pytest.mark.parametrize("name", ["shop", "Shop2", "my-shop", "my_shop", "a"])
def test_identifier_like_names_are_accepted(name: str) -> None:
    assert App(name, scripted()).name == name


def test_an_app_needs_an_agent_and_a_resumability_config() -> None:
    with pytest.raises(ConfigurationError, match="app 'shop': root_agent must be a BaseAgent"):
        App("shop", "assistant")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="resumability_config must be a Resumab"):
        App("shop", scripted(), resumability_config=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="is_resumable must be a bool"):
        ResumabilityConfig(is_resumable="yes")  # type: ignore[arg-type]


# -- Runner(app=...) ------------------------------------------------------------------------------


async def test_a_runner_takes_name_and_plugins_from_its_app() -> None:
    seen = Seen()
    app = App("shop", scripted("assistant", "hello"), plugins=[seen])
    runner = Runner(app=app, session_service=InMemorySessionService())
    assert runner.app is app
    assert (runner.app_name, runner.agent) == ("shop", app.root_agent)
    session = await runner.session_service.create_session(app_name="shop", user_id="u")
    async with runner.run(user_id="u", session_id=session.id, new_message="hi") as events:
        texts = [e.text async for e in events]
    assert texts == ["hello"]
    assert seen.authors == ["assistant"]  # the app's plugin saw the run
    stored = await runner.session_service.get_session(
        app_name="shop", user_id="u", session_id=session.id
    )
    assert stored is not None and [e.author for e in stored.events] == ["user", "assistant"]


def test_the_agent_form_still_works_and_has_no_app() -> None:
    runner = Runner(
        agent=scripted("assistant", "hi there"),
        app_name="legacy",
        session_service=InMemorySessionService(),
    )
    assert runner.app is None and runner.app_name == "legacy"
    events = runner.run_sync(
        user_id="u", session_id="s", new_message=Content.from_text("hi"), auto_create_session=True
    )
    assert [e.text for e in events] == ["hi there"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"agent": scripted("other")}, "agent"),
        ({"app_name": "other"}, "app_name"),
        ({"plugins": [Seen()]}, "plugins"),
        ({"agent": scripted("other"), "app_name": "x"}, "agent, app_name"),
    ],
)
def test_an_app_and_agent_parts_together_are_refused(extra: dict[str, Any], named: str) -> None:
    app = App("shop", scripted())
    with pytest.raises(ConfigurationError, match=f"app='shop' and also {named}:"):
        Runner(app=app, session_service=InMemorySessionService(), **extra)


def test_a_runner_needs_an_app_or_an_agent_and_a_name() -> None:
    service = InMemorySessionService()
    with pytest.raises(
        ConfigurationError, match=re.escape("app=... or both agent=... and app_name")
    ):
        Runner(agent=scripted(), session_service=service)
    with pytest.raises(ConfigurationError, match="app 'x' needs agent="):
        Runner(app_name="x", session_service=service)
    with pytest.raises(ConfigurationError, match="Runner app must be an App, got str"):
        Runner(app="shop", session_service=service)  # type: ignore[arg-type]


# -- loaders --------------------------------------------------------------------------------------


def test_the_loader_accepts_a_real_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shop_app.py").write_text(
        textwrap.dedent(
            """
            from trio_agents import App, LlmAgent
            from trio_agents.testing import ScriptedModel

            root_agent = LlmAgent(name="assistant", model=ScriptedModel(["hi"]))
            app = App(name="shop", root_agent=root_agent)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    apps = load_agents(str(tmp_path / "shop_app.py"))
    assert list(apps) == ["shop"]
    assert apps["shop"].name == "assistant"


def test_load_apps_keeps_an_app_whole_and_an_agent_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, tail in [
        ("shop", 'app = App(name="shop", root_agent=root_agent, resumability_config=RESUMABLE)'),
        ("plain", ""),
    ]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            textwrap.dedent(
                f"""
                from trio_agents import App, LlmAgent, ResumabilityConfig
                from trio_agents.testing import ScriptedModel

                RESUMABLE = ResumabilityConfig(is_resumable=True)
                root_agent = LlmAgent(name="assistant", model=ScriptedModel(["hi"]))
                {tail}
                """
            )
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    apps = load_apps(str(tmp_path))
    assert sorted(apps) == ["plain", "shop"]
    shop, plain = apps["shop"], apps["plain"]
    assert isinstance(shop, App) and shop.is_resumable
    assert isinstance(plain, LlmAgent) and plain.name == "assistant"
    assert load_agents(str(tmp_path)) == {"plain": plain, "shop": shop.root_agent}


def test_an_in_memory_runner_runs_an_app_too() -> None:
    from trio_agents import InMemoryRunner

    app = App("shop", scripted("assistant", "hello"))
    runner = InMemoryRunner(app=app)
    assert (runner.app, runner.app_name, runner.agent) == (app, "shop", app.root_agent)
    events = runner.run_sync(
        user_id="u", session_id="s", new_message="hi", auto_create_session=True
    )
    assert [e.text for e in events] == ["hello"]
    assert InMemoryRunner(scripted()).app_name == "InMemoryRunner"
    with pytest.raises(ConfigurationError, match="app='shop' and also agent"):
        InMemoryRunner(scripted(), app=app)
