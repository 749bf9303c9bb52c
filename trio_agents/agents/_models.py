"""Finding the models an agent tree uses, so their owner can close them."""

from __future__ import annotations

from collections.abc import Iterator

from ..models._base import Model
from ._base import BaseAgent

__all__ = ["models_in_use"]


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
