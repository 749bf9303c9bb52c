"""One error story: the tree in ``trio_agents._errors`` is complete and bad input is typed."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import trio

import trio_agents._errors
from tests.test_exports import PUBLIC_NAMESPACES
from trio_agents import ConfigurationError, Content, Event
from trio_agents.memory import MemoryEntry
from trio_agents.sessions import SqliteSessionService


def _exported_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for namespace in PUBLIC_NAMESPACES:
        module = importlib.import_module(namespace)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseException):
                found[name] = obj
    return found


def _drawn_tree() -> dict[str, str]:
    """Each exception drawn in the module docstring, with the one drawn as its parent."""
    text = trio_agents._errors.__doc__ or ""
    drawing = text.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in drawing.splitlines():
        column = line.find("── ")
        entry = line[column + 3 :] if column >= 0 else line.strip()
        name = entry.split("(")[0].split()[0].removeprefix("testing.")
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[name] = stack[-1][1] if stack else "Exception"
        stack.append((column, name))
    return parents


def test_the_tree_draws_every_exported_exception_under_its_parent() -> None:
    drawn = _drawn_tree()
    exported = _exported_exceptions()
    assert sorted(drawn) == sorted(exported)
    for name, cls in exported.items():
        public_bases = [b.__name__ for b in cls.__mro__[1:] if not b.__name__.startswith("_")]
        assert public_bases[0] == drawn[name], name


def test_typed_errors_keep_the_builtin_a_caller_would_catch() -> None:
    assert issubclass(trio_agents.ConfigurationError, ValueError)
    assert issubclass(trio_agents.SerializationError, ValueError)
    assert issubclass(trio_agents.AgentTimeoutError, TimeoutError)


def test_remembering_an_event_without_content_is_a_configuration_error() -> None:
    event = Event(author="model", id="e1")
    with pytest.raises(ConfigurationError, match="'e1' has no content"):
        MemoryEntry.from_event(event)
    assert MemoryEntry.from_event(Event(author="model", content=Content.from_text("x"))).text == "x"


def test_an_empty_bearer_token_is_a_configuration_error() -> None:
    from trio_agents.server._http import BearerAuth

    async def app(scope: object, receive: object, send: object) -> None:
        raise AssertionError("never called")

    with pytest.raises(ConfigurationError, match="bearer token"):
        BearerAuth(app, token="")  # type: ignore[arg-type]


async def test_a_closed_sqlite_session_service_raises_closed_resource_error(
    tmp_path: Path,
) -> None:
    service = SqliteSessionService(tmp_path / "s.db")
    await service.create_session(app_name="a", user_id="u", session_id="s")
    await service.aclose()
    with pytest.raises(trio.ClosedResourceError, match=r"s\.db"):
        await service.get_session(app_name="a", user_id="u", session_id="s")
