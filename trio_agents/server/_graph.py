"""An app's agent tree for ADK's dev UI: a JSON description and Graphviz DOT source.

The UI renders the DOT text in the browser, so no Graphviz is needed here. Node paths are agent
names from the root joined with ``/`` (``coordinator/billing``), the form events carry in
``nodeInfo.path`` once each segment gets its run suffix (``coordinator@1/billing@1``).
"""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Mapping
from typing import Any

from ..agents import BaseAgent

__all__ = ["agent_json", "dot_source", "find_node", "node_path", "node_paths", "with_node_info"]

_PATHS: weakref.WeakKeyDictionary[BaseAgent, dict[str, str]] = weakref.WeakKeyDictionary()

_THEMES = {
    False: {"bg": "#FFFFFF", "fill": "#F1F5F9", "text": "#0F172A", "line": "#64748B"},
    True: {"bg": "#1E1E1E", "fill": "#2D2D30", "text": "#E5E7EB", "line": "#9CA3AF"},
}


def agent_json(agent: BaseAgent) -> dict[str, Any]:
    """What the UI's info panel shows of ``agent`` and, recursively, its sub-agents."""
    data: dict[str, Any] = {
        "name": agent.name,
        "description": agent.description,
        "agent_type": type(agent).__name__,
    }
    model = getattr(agent, "model", None)
    if model is not None:
        data["model"] = model if isinstance(model, str) else getattr(model, "model", repr(model))
    instruction = getattr(agent, "instruction", None)
    if isinstance(instruction, str):
        data["instruction"] = instruction
    data["tools"] = [{"name": tool.name, "type": "tool"} for tool in _tools(agent)]
    data["sub_agents"] = [agent_json(child) for child in agent.sub_agents]
    return data


def _tools(agent: BaseAgent) -> list[Any]:
    tools = getattr(agent, "tools", None)
    return [tool for tool in tools or () if isinstance(getattr(tool, "name", None), str)]


def find_node(root: BaseAgent, path: str) -> BaseAgent | None:
    """The agent at ``path`` (``a/b``, run suffixes ``@n`` ignored) under ``root``, or None."""
    names = [segment.partition("@")[0] for segment in path.split("/") if segment]
    if not names or names[0] != root.name:
        return None
    node = root
    for name in names[1:]:
        found = next((child for child in node.sub_agents if child.name == name), None)
        if found is None:
            return None
        node = found
    return node


def node_path(agent: BaseAgent) -> str:
    """The ``nodeInfo.path`` of an event ``agent`` authored: ``root@1/…/agent@1``."""
    names: list[str] = []
    node: BaseAgent | None = agent
    while node is not None:
        names.append(f"{node.name}@1")
        node = node.parent_agent
    return "/".join(reversed(names))


def node_paths(root: BaseAgent) -> Mapping[str, str]:
    """Agent name → ``nodeInfo.path`` for every agent under ``root`` (computed once per tree)."""
    paths = _PATHS.get(root)
    if paths is None:
        paths = _PATHS[root] = {}
        stack = [root]
        while stack:
            agent = stack.pop()
            paths.setdefault(agent.name, node_path(agent))
            stack.extend(agent.sub_agents)
    return paths


def with_node_info(event_json: str, path: str | None) -> str:
    """An event's JSON text with ``"nodeInfo": {"path": path}`` added (as is without a path).

    The server adds it when it serializes an event for HTTP; events themselves carry no node.
    """
    if not path or not event_json.endswith("}"):
        return event_json
    return event_json[:-1] + _node_info(path)


@functools.lru_cache(maxsize=1024)
def _node_info(path: str) -> str:
    """The member ``nodeInfo`` adds to an event's JSON object, closing it (once per path)."""
    return f',"nodeInfo":{{"path":{json.dumps(path)}}}}}'


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot_source(root: BaseAgent, *, dark_mode: bool = False) -> str:
    """``root`` and what lies under it as a DOT digraph: agents boxed, tools dashed ellipses."""
    theme = _THEMES[dark_mode]
    lines = [
        "digraph {",
        f'  graph [bgcolor="{theme["bg"]}" rankdir=TB fontname=Helvetica]',
        f'  node [shape=box style="rounded,filled" fillcolor="{theme["fill"]}"'
        f' color="{theme["line"]}" fontcolor="{theme["text"]}" fontname=Helvetica]',
        f'  edge [color="{theme["line"]}" arrowsize=0.7]',
    ]
    _dot_agent(root, lines)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_agent(agent: BaseAgent, lines: list[str]) -> None:
    name = _quoted(agent.name)
    lines.append(f"  {name} [label={_quoted(agent.name)} tooltip={_quoted(type(agent).__name__)}]")
    for tool in _tools(agent):
        tool_id = _quoted(f"{agent.name}/{tool.name}")
        lines.append(f"  {tool_id} [label={_quoted(tool.name)} shape=ellipse style=dashed]")
        lines.append(f"  {name} -> {tool_id} [style=dashed]")
    for child in agent.sub_agents:
        _dot_agent(child, lines)
        lines.append(f"  {name} -> {_quoted(child.name)}")
