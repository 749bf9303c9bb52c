"""Finding the models and toolsets an agent tree uses, so their owner can close them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..models._base import Model
from ._base import BaseAgent

if TYPE_CHECKING:
    from ..tools._toolset import BaseToolset

__all__ = ["models_in_use", "toolsets_in_use"]


def _agents(root: BaseAgent, seen: set[int]) -> Iterator[BaseAgent]:
    if id(root) in seen:
        return
    seen.add(id(root))
    yield root
    for child in root.sub_agents:
        yield from _agents(child, seen)
    for tool in getattr(root, "tools", ()):
        wrapped = getattr(tool, "agent", None)  # AgentTool: the wrapped agent's models too
        if isinstance(wrapped, BaseAgent):
            yield from _agents(wrapped, seen)


def models_in_use(root: BaseAgent) -> list[Model]:
    """Every model instance of the tree: given as instances or already resolved from names."""
    models: dict[int, Model] = {}
    for agent in _agents(root, set()):
        for model in (getattr(agent, "model", None), getattr(agent, "_resolved", None)):
            if isinstance(model, Model):
                models.setdefault(id(model), model)
    return list(models.values())


def toolsets_in_use(root: BaseAgent) -> list[BaseToolset]:
    """Every toolset of the tree (agents of agent tools included), each once."""
    from ..tools._toolset import BaseToolset

    toolsets: dict[int, BaseToolset] = {}
    for agent in _agents(root, set()):
        for tool in getattr(agent, "tools", ()):
            if isinstance(tool, BaseToolset):
                toolsets.setdefault(id(tool), tool)
    return list(toolsets.values())
