"""An app for the MCP serving tests given as an ``App``: its plugin answers for the agent, so a
server that dropped the app's plugins would answer "the agent ran"."""

from __future__ import annotations

from trio_agents import App, CallbackContext, Content, LlmAgent
from trio_agents.agents import BaseAgent
from trio_agents.plugins import BasePlugin
from trio_agents.testing import ScriptedModel


class Stamp(BasePlugin):
    async def before_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> Content | None:
        return Content.from_text(f"answered by the plugin {self.name}", role="model")


app = App(
    "mcp_plugged",
    LlmAgent(
        name="plugged",
        model=ScriptedModel(["the agent ran"]),
        description="Answers through its app's plugin.",
    ),
    plugins=[Stamp("stamp")],
)
