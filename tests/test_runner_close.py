"""Runner.close releases what the Runner's agents hold: plugins, then models."""

from __future__ import annotations

import trio

from trio_agents import InMemoryRunner, LlmAgent, SequentialAgent
from trio_agents.models import LlmRequest, LlmResponse, Model, register_model
from trio_agents.tools import AgentTool


class Closable(Model):
    def __init__(self, name: str = "closable") -> None:
        self.model = name
        self.closed = 0

    async def generate(self, request: LlmRequest) -> LlmResponse:
        raise AssertionError("not called")

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self.closed += 1


async def test_close_closes_each_model_of_the_tree_once() -> None:
    shared, inner = Closable("shared"), Closable("inner")
    helper = LlmAgent(name="helper", model=inner)
    tree = SequentialAgent(
        name="root",
        sub_agents=[
            LlmAgent(name="a", model=shared, tools=[AgentTool(helper)]),
            LlmAgent(name="b", model=shared),
        ],
    )
    async with InMemoryRunner(tree):
        pass
    assert (shared.closed, inner.closed) == (1, 1)


async def test_close_closes_models_resolved_from_names() -> None:
    made: list[Closable] = []

    def factory(name: str) -> Closable:
        made.append(Closable(name))
        return made[-1]

    register_model(r"closable-test-.*", factory)
    agent = LlmAgent(name="a", model="closable-test-1")
    runner = InMemoryRunner(agent)
    assert agent.canonical_model is made[0]
    await runner.close()
    assert made[0].closed == 1


async def test_close_skips_names_never_resolved() -> None:
    register_model(r"never-resolved-.*", lambda name: (_ for _ in ()).throw(AssertionError(name)))
    runner = InMemoryRunner(LlmAgent(name="a", model="never-resolved-1"))
    await runner.close()  # resolving here would raise
