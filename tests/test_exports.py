"""The public surface: ARCHITECTURE §3 names, sorted ``__all__``, fixed ``__module__``."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import trio_agents

PUBLIC_NAMESPACES = [
    "trio_agents",
    "trio_agents.agents",
    "trio_agents.artifacts",
    "trio_agents.cli",
    "trio_agents.memory",
    "trio_agents.models",
    "trio_agents.plugins",
    "trio_agents.server",
    "trio_agents.sessions",
    "trio_agents.testing",
    "trio_agents.testing.strategies",
    "trio_agents.tools",
    "trio_agents.tools.mcp",
    "trio_agents.mcp",
]

CONTRACT = {
    "trio_agents": [
        "Runner",
        "InMemoryRunner",
        "RunConfig",
        "StreamingMode",
        "BaseAgent",
        "SequentialAgent",
        "ParallelAgent",
        "LoopAgent",
        "Event",
        "EventActions",
        "Content",
        "Part",
        "FunctionCall",
        "FunctionResponse",
        "Blob",
        "InvocationContext",
        "CallbackContext",
        "ReadonlyContext",
        "Session",
        "State",
        "TrioAgentsError",
        "ConfigurationError",
        "SessionNotFoundError",
        "SessionExistsError",
        "StaleSessionError",
        "SessionBusyError",
        "ModelError",
        "ToolError",
        "PluginError",
        "AgentTransferError",
        "LlmCallLimitError",
        "SerializationError",
    ],
    "trio_agents.sessions": [
        "SessionService",
        "InMemorySessionService",
        "SqliteSessionService",
        "PostgresSessionService",
        "Session",
    ],
    "trio_agents.plugins": ["BasePlugin"],
    "trio_agents.artifacts": ["ArtifactService", "InMemoryArtifactService", "FileArtifactService"],
    "trio_agents.models": ["Model", "LlmRequest", "LlmResponse"],
    "trio_agents.tools": [
        "AgentTool",
        "BaseTool",
        "FunctionTool",
        "LongRunningFunctionTool",
        "exit_loop",
        "BaseToolset",
    ],
    "trio_agents.tools.mcp": [
        "McpToolset",
        "StdioConnectionParams",
        "StdioServerParameters",
        "StreamableHTTPConnectionParams",
        "SseConnectionParams",
    ],
    "trio_agents.mcp": ["serve"],
    "trio_agents.testing": [
        "ScriptedModel",
        "RecordingPlugin",
        "collect",
        "normalize",
        "check_invariants",
        "RecordingModel",
        "ReplayModel",
        "ReplayMissError",
        "sequential_ids",
        "fixed_clock",
        "scheduler_seed",
        "PerturbedTiming",
    ],
    "trio_agents.testing.strategies": [
        "contents",
        "events",
        "event_actions",
        "state_deltas",
        "applications",
        "interleavings",
        "explore_interleavings",
    ],
    "trio_agents.server": ["create_app", "serve"],
    "trio_agents.memory": ["MemoryService", "InMemoryMemoryService", "SqliteMemoryService"],
}


@pytest.mark.parametrize("namespace", PUBLIC_NAMESPACES)
def test_all_is_sorted_and_every_name_exists(namespace: str) -> None:
    module = importlib.import_module(namespace)
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), f"{namespace}.{name} is listed but missing"


@pytest.mark.parametrize(("namespace", "names"), CONTRACT.items())
def test_contract_names_are_exported(namespace: str, names: list[str]) -> None:
    module = importlib.import_module(namespace)
    missing = sorted(set(names) - set(module.__all__))
    assert missing == []


def test_top_level_names_report_the_public_module() -> None:
    for name in trio_agents.__all__:
        obj = getattr(trio_agents, name)
        if isinstance(obj, type):
            assert obj.__module__ == "trio_agents", name


@pytest.mark.parametrize("namespace", PUBLIC_NAMESPACES)
def test_exported_names_report_a_public_module(namespace: str) -> None:
    """Subpackages fix ``__module__`` too. A name exported from several places reports one of
    them, the top level when it is there (``trio_agents.ToolContext``, not
    ``trio_agents.tools.ToolContext``)."""
    module = importlib.import_module(namespace)
    for name in module.__all__:
        obj = getattr(module, name)
        if not (isinstance(obj, type) or callable(obj)) or not obj.__module__.startswith(
            "trio_agents"
        ):
            continue
        assert not any(part.startswith("_") for part in obj.__module__.split(".")), name
        assert getattr(importlib.import_module(obj.__module__), name) is obj
        if getattr(trio_agents, name, None) is obj:
            assert obj.__module__ == "trio_agents", name


def test_every_public_class_of_a_private_module_is_exported_somewhere() -> None:
    exported = {
        id(getattr(importlib.import_module(ns), name))
        for ns in PUBLIC_NAMESPACES
        for name in importlib.import_module(ns).__all__
    }
    for info in pkgutil.walk_packages(trio_agents.__path__, "trio_agents."):
        leaf = info.name.rsplit(".", 1)[-1]
        if not leaf.startswith("_") or leaf in ("__main__",):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if isinstance(obj, type) and not name.startswith("_"):
                assert id(obj) in exported, f"{info.name}.{name} is not exported"


def test_errors_form_one_tree() -> None:
    for name in trio_agents.__all__:
        obj = getattr(trio_agents, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, trio_agents.TrioAgentsError), name
    assert issubclass(trio_agents.ConfigurationError, ValueError)
    assert issubclass(trio_agents.SessionNotFoundError, LookupError)
    assert issubclass(trio_agents.PluginError, RuntimeError)
