"""The Runner: runs an agent tree against a session service, one invocation per ``run()`` block.

Shape of an invocation (ARCHITECTURE §2)::

    consumer task  ── receive() ──▶  takes the next pending event from the zero-buffer emit
                                     channel, runs on_event plugins, commits, answers the
                                     sender, returns the committed event
    agent task(s)  ── ctx.emit() ──▶ send the event, park until it is answered

The consumer's ``receive()`` is where the Runner commits: an event is committed when the consumer
pulls it, so a slow consumer slows the producers and nothing queues up. All agent tasks live in
the invocation's nursery; leaving the ``async with`` block cancels them and waits for them.

The pieces, one job per module: :mod:`~trio_agents._config` (``RunConfig``),
:mod:`~trio_agents._run_block` (the lifecycle of one run), :mod:`~trio_agents._invocation` (its
state, commits and agents' task), :mod:`~trio_agents._run_stream` (the consumer's end),
:mod:`~trio_agents._emit_channel` (the round trip), :mod:`~trio_agents._aftermath` (closing
responses and error events) and :mod:`~trio_agents._messages` (the user message).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Self

import trio

from ._aftermath import ABANDONED_REASON
from ._app import App
from ._config import DEFAULT_RUN_CONFIG, RunConfig, StreamingMode
from ._content import Content
from ._errors import ConfigurationError
from ._events import Event
from ._messages import user_message
from ._run_block import RunBlock
from ._run_stream import RunStream
from ._state import check_state_delta
from .agents._base import BaseAgent
from .agents._models import models_in_use
from .artifacts._base import ArtifactService
from .artifacts._memory import InMemoryArtifactService
from .memory._base import MemoryService
from .memory._memory import InMemoryMemoryService
from .plugins._base import BasePlugin
from .plugins._manager import PluginManager
from .sessions._base import SessionService
from .sessions._memory import InMemorySessionService
from .tools._hosting import ToolsetHost

__all__ = [
    "ABANDONED_REASON",
    "InMemoryRunner",
    "RunConfig",
    "RunStream",
    "Runner",
    "StreamingMode",
]

ConcurrentRuns = Literal["reject", "queue"]
"""What a second run on a session with a run in flight does: raise at once, or wait its turn."""


class Runner:
    """Runs agents against a session service, one invocation per ``run()`` block.

    ``concurrent_runs`` decides what a second run on a session that has a run in flight does:
    ``"reject"`` raises :class:`~trio_agents.SessionBusyError` at once, ``"queue"`` waits.
    Runs on one session never interleave.

    Give it an :class:`~trio_agents.App` (``Runner(app=app, session_service=...)``: the app
    name and plugins come from the app), or an agent and an app name
    (``Runner(agent=..., app_name=..., plugins=...)``); not both.
    """

    def __init__(
        self,
        *,
        app: App | None = None,
        agent: BaseAgent | None = None,
        app_name: str | None = None,
        session_service: SessionService,
        artifact_service: ArtifactService | None = None,
        memory_service: MemoryService | None = None,
        plugins: Sequence[BasePlugin] | None = None,
        concurrent_runs: ConcurrentRuns = "reject",
        cleanup_timeout: float = 10.0,
        commit_timeout: float = 60.0,
    ) -> None:
        agent, app_name, plugins = _runner_parts(app, agent, app_name, plugins)
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(f"Runner agent must be a BaseAgent, got {agent!r}")
        if concurrent_runs not in ("reject", "queue"):
            raise ConfigurationError(
                f"concurrent_runs must be 'reject' or 'queue', got {concurrent_runs!r}"
            )
        self.app = app
        """The :class:`~trio_agents.App` this Runner runs, or None (built from an agent)."""
        self.resumable = app is not None and app.is_resumable
        """Whether invocations commit checkpoints and can be resumed (from the app's
        ``resumability_config``)."""
        self.agent = agent
        self.app_name = app_name
        self.session_service = session_service
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        self.plugin_manager = PluginManager(plugins)
        self.concurrent_runs = concurrent_runs
        self.cleanup_timeout = cleanup_timeout
        self.commit_timeout = commit_timeout
        self._toolset_host = ToolsetHost(agent)

    def run(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: Content | str | None = None,
        state_delta: Mapping[str, Any] | None = None,
        run_config: RunConfig | None = None,
        invocation_id: str | None = None,
    ) -> contextlib.AbstractAsyncContextManager[RunStream]:
        """Start one invocation, or resume one; iterate the yielded :class:`RunStream` for its
        events.

        With ``invocation_id`` (a resumable app), the run continues that invocation where it
        stands: paused on long-running calls or confirmation requests, failed, cancelled, or cut
        short by a dead process. ``new_message`` may then be omitted, or carry the function
        responses that answer its open calls. Agents that finished are skipped and committed
        tool results are reused (nothing that committed runs twice). A message with function
        responses resumes the invocation of the calls it answers even without ``invocation_id``.

        Raises:
            SessionNotFoundError: no such session (nothing is stored).
            SessionBusyError: a run is in flight on the session and ``concurrent_runs="reject"``.
            ResumeError: ``invocation_id`` names no invocation of the session, one that
                finished, or the app is not resumable; or an answer answers no open call
                (nothing is stored).
            ConfigurationError: a bad message (e.g. one carrying function calls).
            SerializationError: a ``state_delta`` that is not JSON.
            Exception: whatever an agent, tool, model or callback raised (a lone failure keeps its
                type; several at once arrive as an ``ExceptionGroup``).
        """
        run_config = run_config or DEFAULT_RUN_CONFIG
        resuming = invocation_id is not None
        if resuming and not isinstance(invocation_id, str):
            raise ConfigurationError(f"invocation_id must be a str, got {invocation_id!r}")
        message = None if new_message is None and resuming else user_message(new_message)
        if state_delta:
            check_state_delta(state_delta)
        return RunBlock(self, user_id, session_id, message, state_delta, run_config, invocation_id)

    def run_sync(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: Content | str | None = None,
        state_delta: Mapping[str, Any] | None = None,
        run_config: RunConfig | None = None,
        auto_create_session: bool = False,
        invocation_id: str | None = None,
    ) -> list[Event]:
        """Run one invocation to completion under ``trio.run`` and return its events.

        With ``auto_create_session=True`` a missing session is created first (empty state), so a
        script or a notebook needs no async code at all.
        """

        async def collect() -> list[Event]:
            if auto_create_session:
                service, app_name = self.session_service, self.app_name
                found = await service.get_session(
                    app_name=app_name, user_id=user_id, session_id=session_id
                )
                if found is None:
                    await service.create_session(
                        app_name=app_name, user_id=user_id, session_id=session_id
                    )
            async with self.run(
                user_id=user_id,
                session_id=session_id,
                new_message=new_message,
                state_delta=state_delta,
                run_config=run_config,
                invocation_id=invocation_id,
            ) as events:
                return [event async for event in events]

        return trio.run(collect)

    async def close(self) -> None:
        """Close the plugins, the toolsets, then the models of the agent tree (each within
        ``cleanup_timeout``).

        Models are closed whether they were given as instances or resolved from names, so an
        HTTP model's client lives exactly as long as the Runner; a model shared with another
        Runner must not be used after either is closed.
        """
        try:
            await self.plugin_manager.close(per_plugin_timeout=self.cleanup_timeout)
        finally:
            await self._toolset_host.close_toolsets(self.cleanup_timeout)
            for model in models_in_use(self.agent):
                with trio.move_on_after(self.cleanup_timeout):
                    await model.aclose()

    async def __aenter__(self) -> Self:
        """Open the scope toolsets keep their connections in for the Runner's lifetime."""
        await self._toolset_host.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the Runner (shielded), then the toolsets' scope."""
        try:
            with trio.CancelScope(shield=True):
                await self.close()
        finally:
            await self._toolset_host.leave()


def _runner_parts(
    app: App | None,
    agent: BaseAgent | None,
    app_name: str | None,
    plugins: Sequence[BasePlugin] | None,
) -> tuple[BaseAgent, str, Sequence[BasePlugin]]:
    """The root agent, app name and plugins of a Runner, from an app or given one by one."""
    if app is None:
        if app_name is None:
            raise ConfigurationError("Runner needs app=... or both agent=... and app_name=...")
        if agent is None:
            raise ConfigurationError(f"Runner for app {app_name!r} needs agent=... (or app=...)")
        return agent, app_name, plugins or ()
    if not isinstance(app, App):
        raise ConfigurationError(f"Runner app must be an App, got {type(app).__name__}")
    given = [
        name
        for name, value in (("agent", agent), ("app_name", app_name), ("plugins", plugins))
        if value is not None
    ]
    if given:
        raise ConfigurationError(
            f"Runner got app={app.name!r} and also {', '.join(given)}: the app names its root "
            "agent, app name and plugins; give either app=... or agent=... with app_name=..."
        )
    return app.root_agent, app.name, app.plugins


class InMemoryRunner(Runner):
    """A :class:`Runner` with fresh in-memory services (R-RUN-9), for an agent or an ``app``."""

    def __init__(
        self,
        agent: BaseAgent | None = None,
        *,
        app_name: str | None = None,
        plugins: Sequence[BasePlugin] | None = None,
        app: App | None = None,
        **kwargs: Any,
    ) -> None:
        if "session_service" in kwargs:
            raise ConfigurationError(
                "InMemoryRunner makes its own InMemorySessionService and takes no "
                "session_service; for another one use Runner(agent=..., app_name=..., "
                "session_service=...)"
            )
        if app is None:
            app_name = app_name or "InMemoryRunner"
        super().__init__(
            app=app,
            agent=agent,
            app_name=app_name,
            session_service=InMemorySessionService(),
            artifact_service=kwargs.pop("artifact_service", None) or InMemoryArtifactService(),
            memory_service=kwargs.pop("memory_service", None) or InMemoryMemoryService(),
            plugins=plugins,
            **kwargs,
        )
