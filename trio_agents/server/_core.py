"""The state one server app shares between requests: Runners, services, runs in flight."""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import trio

from .._app import App
from .._runner import Runner
from ..agents import BaseAgent
from ..agents._models import models_in_use
from ..artifacts import ArtifactService
from ..memory import MemoryService
from ..plugins import BasePlugin
from ..plugins._manager import PluginManager
from ..sessions import SessionService
from ._cluster import LocalCluster
from ._graph import node_paths
from ._http import HTTPError
from ._live import Frame, LiveRun, SessionKey
from ._traces import SpanRecorder

__all__ = ["OUTCOMES_KEPT"]

logger = logging.getLogger("trio_agents.server")

OUTCOMES_KEPT = 1024
"""How many sessions remember the terminal frame of their last run (for late followers)."""

Agents = Mapping[str, BaseAgent | App] | Callable[[], Mapping[str, BaseAgent | App]]


class ServerCore:
    """Runners by app name (sharing the services), the runs in flight, the lifespan nursery."""

    def __init__(
        self,
        agents: Agents,
        *,
        session_service: SessionService,
        artifact_service: ArtifactService,
        memory_service: MemoryService | None,
        plugins: Sequence[BasePlugin],
        max_detached_runs: int,
        cleanup_timeout: float,
        cluster: LocalCluster | None = None,
    ) -> None:
        self._agents = agents
        self._runners: dict[str, Runner] | None = None
        self.session_service = session_service
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        self.plugins = tuple(plugins)
        self.max_detached_runs = max_detached_runs
        self.cleanup_timeout = cleanup_timeout
        self.detached_runs = 0
        self.nursery: trio.Nursery | None = None
        """The lifespan nursery detached runs live in (None outside the server's lifespan)."""
        self.live: dict[SessionKey, LiveRun] = {}
        self.outcomes: collections.OrderedDict[SessionKey, Frame] = collections.OrderedDict()
        self.cluster = cluster or LocalCluster()
        """The other server processes on the same store (none by default)."""
        self.node_info = False
        """Events served over HTTP carry ``nodeInfo`` (for ADK's dev UI: ``dev_routes=True``)."""
        self.traces: SpanRecorder | None = None
        """The span recorder of the dev routes: every event a run serves is shown to it."""

    # -- apps ----------------------------------------------------------------------------------

    @property
    def runners(self) -> dict[str, Runner]:
        """The Runners by app name."""
        return self.load()

    def load(self) -> dict[str, Runner]:
        """Build the Runners on first use (a loader is called then)."""
        if self._runners is None:
            agents = self._agents() if callable(self._agents) else self._agents
            self._runners = {name: self._runner_for(name, agent) for name, agent in agents.items()}
        return self._runners

    def _runner_for(self, name: str, agent: BaseAgent | App) -> Runner:
        """A Runner of ``agent`` (or of an app, under ``name``, with its plugins and ours)."""
        if isinstance(agent, App):
            app = App(
                name,
                agent.root_agent,
                plugins=[*agent.plugins, *self.plugins],
                resumability_config=agent.resumability_config,
            )
            return Runner(app=app, **self._runner_options())
        return Runner(agent=agent, app_name=name, plugins=self.plugins, **self._runner_options())

    def _runner_options(self) -> dict[str, Any]:
        return {
            "session_service": self.session_service,
            "artifact_service": self.artifact_service,
            "memory_service": self.memory_service,
            "concurrent_runs": "reject",
            "cleanup_timeout": self.cleanup_timeout,
        }

    def node_paths(self, app_name: str) -> Mapping[str, str]:
        """Agent name → node path in ``app_name``'s tree; empty unless :attr:`node_info`."""
        return node_paths(self.runner(app_name).agent) if self.node_info else {}

    def runner(self, app_name: str) -> Runner:
        runner = self.runners.get(app_name)
        if runner is None:
            raise HTTPError(404, f"App not found: {app_name}")
        return runner

    # -- runs ----------------------------------------------------------------------------------

    def register(self, live: LiveRun) -> None:
        self.live[live.key] = live
        self.cluster.registered(self, live.key)

    def unregister(self, live: LiveRun) -> None:
        """Forget ``live`` (remembering its terminal frame for late followers)."""
        if self.live.get(live.key) is live:
            del self.live[live.key]
        if live.terminal is not None:
            self.remember(live.key, live.terminal)
            self.cluster.ended(live.key, live.terminal)

    def remember(self, key: SessionKey, terminal: Frame) -> None:
        """Keep ``terminal`` as the last outcome of ``key`` (for late followers)."""
        self.outcomes[key] = terminal
        self.outcomes.move_to_end(key)
        while len(self.outcomes) > OUTCOMES_KEPT:
            self.outcomes.popitem(last=False)

    def cancel_runs(self, reason: str) -> None:
        """Cancel every run in flight: each one ends with its ``cancelled`` terminal frame."""
        for live in list(self.live.values()):
            live.cancel(reason)

    # -- shutdown ------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the plugins once, then every model of every app (each within the timeout)."""
        try:
            await PluginManager(self.plugins).close(per_plugin_timeout=self.cleanup_timeout)
        finally:
            models = {
                id(model): model
                for runner in (self._runners or {}).values()
                for model in models_in_use(runner.agent)
            }
            for model in models.values():
                with trio.move_on_after(self.cleanup_timeout):
                    try:
                        await model.aclose()
                    except Exception:
                        logger.exception("could not close model %r", model)
