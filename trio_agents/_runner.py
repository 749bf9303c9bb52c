"""The Runner: one invocation per ``async with runner.run(...)``, structured end to end.

Shape of an invocation (ARCHITECTURE §2)::

    consumer task  ── receive() ──▶  takes the next pending event from the zero-buffer emit
                                     channel, runs on_event plugins, commits, answers the
                                     sender, returns the committed event
    agent task(s)  ── ctx.emit() ──▶ send the event, park until it is answered

The consumer's ``receive()`` is where the Runner commits: an event is committed when the consumer
pulls it, so a slow consumer slows the producers and nothing queues up. All agent tasks live in
the invocation's nursery; leaving the ``async with`` block cancels them and waits for them.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self

import attrs
import trio

from ._content import Content, Part
from ._context import InvocationContext
from ._errors import ConfigurationError, PluginError, SessionNotFoundError
from ._events import Event, EventActions
from ._handoff import EmitChannel
from ._ids import new_invocation_id
from ._state import check_state_delta
from ._util import without_cancelled
from .agents._base import FAILURE_ATTR, BaseAgent
from .agents._models import models_in_use
from .agents._transfer import agent_to_run
from .artifacts._memory import InMemoryArtifactService
from .memory._memory import InMemoryMemoryService
from .plugins._base import BasePlugin
from .plugins._manager import PluginManager
from .sessions._base import GetSessionConfig, Session, SessionService
from .sessions._memory import InMemorySessionService

__all__ = ["InMemoryRunner", "RunConfig", "RunStream", "Runner", "StreamingMode"]

logger = logging.getLogger("trio_agents")

ABANDONED_REASON = "the invocation ended without answering (its process stopped)"
"""The ``reason`` of the response that closes a call left open by a dead invocation."""

HISTORY_CACHE_SESSIONS = 1024
"""How many sessions keep their incrementally built LLM histories between invocations."""


class StreamingMode(enum.Enum):
    """How model output reaches the consumer."""

    NONE = "none"
    """One event per model response."""
    SSE = "sse"
    """Partial chunks as they arrive, then the final aggregate (only the aggregate is stored)."""


def _check_max_llm_calls(instance: object, attribute: object, value: int) -> None:
    if value >= sys.maxsize:
        raise ConfigurationError(f"max_llm_calls must be less than sys.maxsize, got {value}")
    if value <= 0:
        logger.warning("max_llm_calls=%d: the number of model calls is not limited", value)


@attrs.frozen(kw_only=True)
class RunConfig:
    """Per-run settings."""

    streaming_mode: StreamingMode = StreamingMode.NONE
    max_llm_calls: int = attrs.field(default=500, validator=_check_max_llm_calls)
    """Model calls allowed per invocation; ``<= 0`` means unlimited (R-RUN-10)."""
    custom_metadata: Mapping[str, Any] | None = None
    """Merged into every event's ``custom_metadata`` (the event's own keys win)."""
    get_session_config: GetSessionConfig | None = None
    """Which history the invocation loads (R-ST-8)."""


_DEFAULT_RUN_CONFIG = RunConfig()  # frozen: one shared instance serves every run without one


@attrs.frozen
class _OpenCall:
    author: str
    branch: str | None
    name: str


class _Invocation:
    """The shared state of one invocation: session, counters, open calls, cancel scope."""

    __slots__ = (
        "_histories",
        "agent_failure",
        "cancel_scope",
        "emitted",
        "invocation_id",
        "llm_calls",
        "open_calls",
        "plain",
        "root_ctx",
        "run_config",
        "runner",
        "session",
        "user_content",
    )

    def __init__(
        self,
        runner: Runner,
        session: Session,
        run_config: RunConfig,
        invocation_id: str | None = None,
    ) -> None:
        self.runner = runner
        self.session = session
        self.run_config = run_config
        self.invocation_id = invocation_id or new_invocation_id()
        self.user_content: Content | None = None
        self.cancel_scope = trio.CancelScope()
        self.emitted = 0
        self.llm_calls = 0
        self.open_calls: dict[str, _OpenCall] = {}
        self.agent_failure: Exception | None = None
        self.root_ctx: InvocationContext | None = None
        self.plain = not runner.plugin_manager and not run_config.custom_metadata
        """No plugins and no custom metadata: events are committed as emitted."""
        self._histories: dict[tuple[str, str | None], Any] | None = None

    @property
    def histories(self) -> dict[tuple[str, str | None], Any]:
        """The session's LLM-history cache (looked up when an LLM agent first needs it)."""
        if self._histories is None:
            self._histories = self.runner._histories_of(self.session)
        return self._histories

    # -- consumer side: commit ------------------------------------------------------------------

    def commit_nowait(self, event: Event) -> Event:
        """Commit without waiting, or raise :class:`trio.WouldBlock` (plugins, metadata or I/O)."""
        if not self.plain:
            raise trio.WouldBlock
        if event.partial:
            return event
        committed = self.runner.session_service.append_event_nowait(self.session, event)
        if committed.content is not None:
            self._track_calls(committed)
        return committed

    async def commit(self, event: Event) -> Event:
        """Run ``on_event`` plugins, then append ``event`` unless partial; return it as stored."""
        event = self._with_metadata(event)
        if self.runner.plugin_manager:
            event = await self._on_event(event)
        if event.partial:
            return event
        return self._tracked(await self.runner.session_service.append_event(self.session, event))

    def _with_metadata(self, event: Event) -> Event:
        metadata = self.run_config.custom_metadata
        if not metadata:
            return event
        return attrs.evolve(event, custom_metadata={**metadata, **(event.custom_metadata or {})})

    async def _on_event(self, event: Event) -> Event:
        assert self.root_ctx is not None
        replaced = await self.runner.plugin_manager.on_event(self.root_ctx, event)
        if replaced is None:
            return event
        # The replacement keeps the original identity (ARCHITECTURE §4).
        return attrs.evolve(
            replaced, id=event.id, invocation_id=event.invocation_id, timestamp=event.timestamp
        )

    def _tracked(self, committed: Event) -> Event:
        if committed.content is not None:
            self._track_calls(committed)
        return committed

    def _track_calls(self, event: Event) -> None:
        assert event.content is not None
        waiting = event.long_running_tool_ids or ()
        for part in event.content.parts:
            call = part.function_call
            if call is not None and call.id and call.id not in waiting:
                self.open_calls[call.id] = _OpenCall(event.author, event.branch, call.name)
            response = part.function_response
            if response is not None and response.id:
                self.open_calls.pop(response.id, None)

    # -- agent side: drive ------------------------------------------------------------------------

    async def drive(self, ctx: InvocationContext, channel: EmitChannel) -> None:
        """Run the root agent (or a ``before_run`` short-circuit) inside the cancel scope."""
        plugins = self.runner.plugin_manager
        try:
            with self.cancel_scope:  # the agents only: the consumer's block is not cancelled
                content = await plugins.before_run(ctx) if plugins else None
                if content is not None:
                    await ctx.emit(Event(author="model", content=content))
                else:
                    await agent_to_run(ctx.agent, self.session.events).run(ctx)
        except Exception as exc:
            self.agent_failure = exc
            await self.notify_run_error(ctx, exc)
            raise
        finally:  # closes without a checkpoint, so a cancellation cannot mask an error
            channel.close_send()

    async def notify_run_error(self, ctx: InvocationContext, exc: Exception) -> None:
        plugins = self.runner.plugin_manager
        if not plugins:
            return
        try:
            with trio.move_on_after(self.runner.cleanup_timeout, shield=True):
                await plugins.on_run_error(ctx, exc)
        except PluginError as hook_failure:
            exc.add_note(f"also: {hook_failure} ({hook_failure.__cause__!r})")

    # -- aftermath --------------------------------------------------------------------------------

    async def seal(self, reason: str) -> None:
        """Commit a response for every call left open, then one error event per agent failure."""
        for event in self._closing_events(reason):
            await self._append_quietly(event)
        for exc in _leaves(self.agent_failure):
            author, branch = getattr(exc, FAILURE_ATTR, (self.runner.agent.name, None))
            code = getattr(exc, "status", None)
            await self._append_quietly(
                Event(
                    invocation_id=self.invocation_id,
                    author=author,
                    branch=branch,
                    error_code=code if isinstance(code, str) else type(exc).__name__,
                    error_message=str(exc),
                )
            )

    def _closing_events(self, reason: str) -> list[Event]:
        groups: dict[tuple[str, str | None], list[Part]] = {}
        for call_id, call in self.open_calls.items():
            response = {"error": "cancelled", "reason": reason}
            part = Part.from_function_response(call.name, response, id=call_id)
            groups.setdefault((call.author, call.branch), []).append(part)
        self.open_calls.clear()
        return [
            Event(
                invocation_id=self.invocation_id,
                author=author,
                branch=branch,
                content=Content(role="user", parts=parts),
            )
            for (author, branch), parts in groups.items()
        ]

    async def _append_quietly(self, event: Event) -> None:
        try:
            await self.runner.session_service.append_event(self.session, event)
        except Exception:
            logger.exception("could not store the aftermath event of %s", self.invocation_id)


def _leaves(exc: BaseException | None) -> Iterable[BaseException]:
    if exc is None:
        return ()
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return (exc,)


class RunStream(trio.abc.ReceiveChannel[Event]):
    """The consumer's end of an invocation: iterate it to receive committed events.

    ``receive()`` commits the next event an agent emitted and returns it; the agent resumes only
    then. ``cancel()`` stops the run from anywhere; the stream then ends after the agents are
    cancelled.
    """

    __slots__ = ("_channel", "_closed", "_inv")

    def __init__(self, invocation: _Invocation, channel: EmitChannel):
        self._inv = invocation
        self._channel = channel
        self._closed = False

    @property
    def invocation_id(self) -> str:
        return self._inv.invocation_id

    @property
    def session(self) -> Session:
        """The live session of the invocation (state and history as committed so far)."""
        return self._inv.session

    def cancel(self, reason: str | None = None) -> None:
        """Cancel the run: agents stop, committed events stay, open calls get closed."""
        self._inv.cancel_scope.cancel(reason=reason or "run cancelled by the caller")

    @property
    def cancelled(self) -> bool:
        return self._inv.cancel_scope.cancel_called

    async def receive(self) -> Event:
        """Commit the next event an agent emitted and return it (its agent resumes then).

        Raises:
            trio.EndOfChannel: the run is over.
            trio.ClosedResourceError: the stream was closed.
        """
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise trio.EndOfChannel from None

    async def __anext__(self) -> Event:
        # ``async for`` comes here directly: one frame less per event than through receive().
        if self._closed:
            raise trio.ClosedResourceError("the event stream is closed")
        while True:
            try:
                pending = await self._channel.receive()
            except trio.EndOfChannel:
                raise StopAsyncIteration from None
            inv = self._inv
            inv.emitted += 1
            try:
                try:
                    committed = inv.commit_nowait(pending.event)
                except trio.WouldBlock:
                    with trio.fail_after(inv.runner.commit_timeout, shield=True):
                        committed = await inv.commit(pending.event)
            except Exception as exc:
                pending.fail(exc)
                continue
            pending.set(committed)
            return committed

    def close(self) -> None:
        """Stop receiving: later receives raise ``trio.ClosedResourceError``."""
        if not self._closed:
            self._closed = True
            self._channel.close_receive()

    async def aclose(self) -> None:
        self.cancel("the consumer closed the event stream")
        self.close()
        await trio.lowlevel.checkpoint()


ConcurrentRuns = Literal["reject", "queue"]


class Runner:
    """Runs agents against a session service, one invocation per ``run()`` block.

    ``concurrent_runs`` decides what a second run on a session that has a run in flight does:
    ``"reject"`` raises :class:`~trio_agents.SessionBusyError` at once, ``"queue"`` waits.
    Runs on one session never interleave.
    """

    def __init__(
        self,
        *,
        agent: BaseAgent,
        app_name: str,
        session_service: SessionService,
        artifact_service: Any = None,
        memory_service: Any = None,
        plugins: Sequence[BasePlugin] = (),
        concurrent_runs: ConcurrentRuns = "reject",
        cleanup_timeout: float = 10.0,
        commit_timeout: float = 60.0,
    ) -> None:
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(f"Runner agent must be a BaseAgent, got {agent!r}")
        if concurrent_runs not in ("reject", "queue"):
            raise ConfigurationError(
                f"concurrent_runs must be 'reject' or 'queue', got {concurrent_runs!r}"
            )
        self.agent = agent
        self.app_name = app_name
        self.session_service = session_service
        self.artifact_service = artifact_service
        self.memory_service = memory_service
        self.plugin_manager = PluginManager(plugins)
        self.concurrent_runs = concurrent_runs
        self.cleanup_timeout = cleanup_timeout
        self._histories: collections.OrderedDict[
            tuple[str, str], dict[tuple[str, str | None], Any]
        ] = collections.OrderedDict()
        self.commit_timeout = commit_timeout

    def run(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: Content | str | None = None,
        state_delta: Mapping[str, Any] | None = None,
        run_config: RunConfig | None = None,
    ) -> contextlib.AbstractAsyncContextManager[RunStream]:
        """Start one invocation; iterate the yielded :class:`RunStream` for its events.

        Raises:
            SessionNotFoundError: no such session (nothing is stored).
            SessionBusyError: a run is in flight on the session and ``concurrent_runs="reject"``.
            ConfigurationError: a bad message (e.g. one carrying function calls).
            SerializationError: a ``state_delta`` that is not JSON.
            Exception: whatever an agent, tool, model or callback raised (a lone failure keeps its
                type; several at once arrive as an ``ExceptionGroup``).
        """
        run_config = run_config or _DEFAULT_RUN_CONFIG
        message = _user_message(new_message)
        if state_delta:
            check_state_delta(state_delta)
        return _RunBlock(self, user_id, session_id, message, state_delta, run_config)

    async def _close_abandoned_calls(self, session: Session) -> None:
        """Answer the calls a dead invocation left open, so the history stays well-formed.

        Only the newest invocation can have any (every run seals its own calls, and the next
        run closes those of a run whose process died), so only its events are scanned.
        Long-running calls stay open: the client answers them.
        """
        for event in _abandoned_call_events(session.events):
            await self.session_service.append_event(session, event)

    async def _append_user_event(
        self,
        inv: _Invocation,
        ctx: InvocationContext,
        message: Content,
        state_delta: Mapping[str, Any] | None,
    ) -> None:
        if self.plugin_manager:
            message = await self.plugin_manager.on_user_message(ctx, message) or message
        inv.user_content = message
        event = Event(
            invocation_id=inv.invocation_id,
            author="user",
            content=message,
            actions=EventActions(state_delta=state_delta or {}),
        )
        service = self.session_service
        try:  # the lease was the run's checkpoint: an in-memory store commits without another
            service.append_event_nowait(inv.session, event)
        except trio.WouldBlock:
            await service.append_event(inv.session, event)

    async def _finish(self, inv: _Invocation, ctx: InvocationContext) -> None:
        reason = (inv.cancel_scope.cancelled_caught and "run cancelled") or "run ended"
        if inv.agent_failure is not None:
            reason = f"run failed: {type(inv.agent_failure).__name__}"
        await inv.seal(reason)
        if inv.agent_failure is None and self.plugin_manager:
            try:
                await self.plugin_manager.after_run(ctx)
            except PluginError as exc:
                await inv.notify_run_error(ctx, exc)  # R-PLG-8: a failing after_run is an error
                raise

    def run_sync(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: Content | str | None = None,
        state_delta: Mapping[str, Any] | None = None,
        run_config: RunConfig | None = None,
        auto_create_session: bool = False,
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
            ) as events:
                return [event async for event in events]

        return trio.run(collect)

    def _histories_of(self, session: Session) -> dict[tuple[str, str | None], Any]:
        """The LLM-history cache of ``session`` (kept for the most recent sessions only)."""
        key = (session.user_id, session.id)
        cache = self._histories.pop(key, None)
        if cache is None:
            cache = {}
        self._histories[key] = cache
        while len(self._histories) > HISTORY_CACHE_SESSIONS:
            self._histories.popitem(last=False)
        return cache

    async def close(self) -> None:
        """Close the plugins, then the models of the agent tree (each within ``cleanup_timeout``).

        Models are closed whether they were given as instances or resolved from names, so an
        HTTP model's client lives exactly as long as the Runner; a model shared with another
        Runner must not be used after either is closed.
        """
        try:
            await self.plugin_manager.close(per_plugin_timeout=self.cleanup_timeout)
        finally:
            for model in models_in_use(self.agent):
                with trio.move_on_after(self.cleanup_timeout):
                    await model.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with trio.CancelScope(shield=True):
            await self.close()


class _RunBlock:
    """``async with runner.run(...) as stream``: one invocation, start to aftermath.

    Entering takes the session's lease, loads the session, commits the user message and starts
    the root agent's task in the invocation's nursery; leaving cancels whatever still runs,
    waits for it, seals open calls (shielded, within ``cleanup_timeout``) and gives the lease
    back. A plain class rather than stacked ``asynccontextmanager`` generators: one object per
    run, no async generator frames to keep alive while a run is in flight.
    """

    __slots__ = (
        "_channel",
        "_ctx",
        "_inv",
        "_lease",
        "_message",
        "_nursery",
        "_run_config",
        "_runner",
        "_session_id",
        "_state_delta",
        "_stream",
        "_user_id",
    )

    def __init__(
        self,
        runner: Runner,
        user_id: str,
        session_id: str,
        message: Content,
        state_delta: Mapping[str, Any] | None,
        run_config: RunConfig,
    ) -> None:
        self._runner = runner
        self._user_id = user_id
        self._session_id = session_id
        self._message = message
        self._state_delta = state_delta
        self._run_config = run_config

    async def __aenter__(self) -> RunStream:
        runner = self._runner
        lease = runner.session_service.lease(
            app_name=runner.app_name,
            user_id=self._user_id,
            session_id=self._session_id,
            wait=runner.concurrent_runs == "queue",
        )
        await lease.__aenter__()
        try:
            stream = await self._start()
        except BaseException as exc:  # give the lease back, then let the failure through
            await lease.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        self._lease = lease
        return stream

    async def _start(self) -> RunStream:
        runner = self._runner
        session = await _read_session(
            runner.session_service,
            app_name=runner.app_name,
            user_id=self._user_id,
            session_id=self._session_id,
            config=self._run_config.get_session_config,
        )
        if session is None:
            raise SessionNotFoundError(self._session_id)
        await runner._close_abandoned_calls(session)
        answered = _answered_invocation(self._message, session)
        inv = self._inv = _Invocation(runner, session, self._run_config, answered)
        channel = EmitChannel()
        ctx = self._ctx = InvocationContext(invocation=inv, agent=runner.agent, send=channel)
        inv.root_ctx = ctx
        await runner._append_user_event(inv, ctx, self._message, self._state_delta)
        self._channel = channel
        self._stream = stream = RunStream(inv, channel)
        self._nursery = trio.open_nursery()
        nursery = await self._nursery.__aenter__()
        nursery.start_soon(inv.drive, ctx, channel)
        return stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        lease = self._lease
        try:
            suppress = await self._stop(exc)
        except BaseException as error:  # the lease sees what leaves the run, as with `async with`
            if not await lease.__aexit__(type(error), error, error.__traceback__):
                raise
            return True
        if suppress or exc is None:
            await lease.__aexit__(None, None, None)
            return suppress
        return bool(await lease.__aexit__(type(exc), exc, exc.__traceback__))

    async def _stop(self, exc: BaseException | None) -> bool:
        """Cancel and wait for the agents, seal, and say whether ``exc`` was absorbed."""
        inv, runner = self._inv, self._runner
        if self._channel.sending:  # the agents still run (cancel() is not free: skip it if not)
            inv.cancel_scope.cancel(reason="the consumer left the run block")
        try:
            tb = None if exc is None else exc.__traceback__
            return bool(await self._nursery.__aexit__(type(exc) if exc else None, exc, tb))
        except BaseExceptionGroup as group:
            failure = without_cancelled(group)
            if failure is group:
                raise
            if failure is exc:
                return False  # the body's own failure goes on as it was raised
            raise failure from failure.__cause__
        finally:
            # Without open calls, a failure or plugins there is no aftermath to wait for.
            if inv.open_calls or inv.agent_failure is not None or runner.plugin_manager:
                with trio.move_on_after(runner.cleanup_timeout, shield=True):
                    await runner._finish(inv, self._ctx)
            self._stream.close()
            inv.root_ctx = None  # no cycle left: the invocation is freed without the cyclic GC


class InMemoryRunner(Runner):
    """A :class:`Runner` with fresh in-memory services (R-RUN-9)."""

    def __init__(
        self,
        agent: BaseAgent,
        *,
        app_name: str = "InMemoryRunner",
        plugins: Sequence[BasePlugin] = (),
        **kwargs: Any,
    ) -> None:
        if "session_service" in kwargs:
            raise ConfigurationError(
                "InMemoryRunner makes its own InMemorySessionService and takes no "
                "session_service; for another one use Runner(agent=..., app_name=..., "
                "session_service=...)"
            )
        super().__init__(
            agent=agent,
            app_name=app_name,
            session_service=InMemorySessionService(),
            artifact_service=kwargs.pop("artifact_service", None) or InMemoryArtifactService(),
            memory_service=kwargs.pop("memory_service", None) or InMemoryMemoryService(),
            plugins=plugins,
            **kwargs,
        )


async def _read_session(service: SessionService, **where: Any) -> Session | None:
    """The session to run on, read without another checkpoint when the store allows it."""
    try:
        return service.get_session_nowait(**where)
    except trio.WouldBlock:
        return await service.get_session(**where)


def _abandoned_call_events(events: Sequence[Event]) -> list[Event]:
    """Closing responses for the open, not long-running calls of the newest invocation."""
    if not events:
        return []
    newest = events[-1].invocation_id
    answered: set[str | None] = set()
    open_calls: dict[tuple[str, str | None], list[Part]] = {}
    for event in reversed(events):
        if event.invocation_id != newest:
            break
        answered.update(r.id for r in event.get_function_responses())
        waiting = event.long_running_tool_ids or frozenset()
        for call in reversed(event.get_function_calls()):
            if call.id not in answered and call.id not in waiting:
                response = {"error": "cancelled", "reason": ABANDONED_REASON}
                part = Part.from_function_response(call.name, response, id=call.id)
                open_calls.setdefault((event.author, event.branch), []).insert(0, part)
    return [
        Event(
            invocation_id=newest,
            author=author,
            branch=branch,
            content=Content(role="user", parts=parts),
        )
        for (author, branch), parts in open_calls.items()
    ]


def _answered_invocation(message: Content, session: Session) -> str | None:
    """The invocation whose calls ``message`` answers, or None for a message with no answers.

    Function responses in a user message must answer calls in the history (R-RUN-2), all from one
    invocation; the run then continues that invocation's id (R-RUN-3, R-LRO-3 [2.13]).
    """
    ids = {p.function_response.id for p in message.parts if p.function_response is not None}
    if not ids:
        return None
    if None in ids:
        raise ConfigurationError("a function response in the user message has no call id")
    owners: dict[str, str] = {}
    for event in reversed(session.events):
        for call in event.get_function_calls():
            if call.id is not None and call.id in ids and call.id not in owners:
                owners[call.id] = event.invocation_id
        if len(owners) == len(ids):
            break
    missing = sorted(str(i) for i in ids if i not in owners)
    if missing:
        raise ConfigurationError(f"Function call not found for function response ids: {missing}")
    invocations = set(owners.values())
    if len(invocations) > 1:
        raise ConfigurationError(
            f"the function responses answer calls of several invocations: {sorted(invocations)}"
        )
    return invocations.pop() or None


def _user_message(message: Content | str | None) -> Content:
    """Validate and normalize the user message (R-RUN-2)."""
    if message is None:
        raise ConfigurationError("new_message is required: there is no paused run to resume")
    if isinstance(message, str):
        return Content.from_text(message, role="user")
    if not isinstance(message, Content):
        raise ConfigurationError(
            f"new_message must be a Content or a str, got {type(message).__name__}"
        )
    if any(p.function_call is not None for p in message.parts):
        raise ConfigurationError("User message cannot contain function calls.")
    if message.role != "user":
        message = Content(role="user", parts=message.parts)
    return message
