"""``async with runner.run(...)``: the lifecycle of one invocation, from lease to aftermath."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

import trio

from ._aftermath import abandoned_call_events
from ._context import InvocationContext
from ._emit_channel import EmitChannel
from ._errors import PluginError, SessionNotFoundError
from ._events import Event, EventActions
from ._invocation import Invocation
from ._messages import answered_branch, answered_invocation
from ._resume import resumption
from ._run_stream import RunStream
from ._tool_confirmation import check_confirmation_answers
from ._util import without_cancelled
from .sessions._base import Session, SessionService

if TYPE_CHECKING:
    from ._config import RunConfig
    from ._content import Content
    from ._runner import Runner

__all__: list[str] = []  # internal: Runner.run() returns a RunBlock


class RunBlock:
    """``async with runner.run(...) as stream``: one invocation, start to aftermath.

    The invocation's lifecycle, in order. Entering takes the session's lease, loads the session,
    closes the calls a dead invocation left open, commits the user message and starts the root
    agent's task (:meth:`Invocation.drive`) in the invocation's nursery; leaving cancels whatever
    still runs, waits for it, runs ``after_run`` plugins after a run that did not fail, raises
    the run's failure and gives the lease back. A plain class rather than stacked
    ``asynccontextmanager`` generators: one object per run, no async generator frames to keep
    alive while a run is in flight.
    """

    __slots__ = (
        "_channel",
        "_ctx",
        "_inv",
        "_invocation_id",
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
        message: Content | None,
        state_delta: Mapping[str, Any] | None,
        run_config: RunConfig,
        invocation_id: str | None = None,
    ) -> None:
        self._runner = runner
        self._invocation_id = invocation_id
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
        message = self._message  # everything is checked before anything is stored
        answered = None if message is None else answered_invocation(message, session)
        resume = resumption(
            runner.agent,
            runner.resumable,
            session.events,
            self._invocation_id,
            message,
            answered,
        )
        if resume is not None:
            message = self._message = resume.message  # None: no message, or a retried one
        if message is not None and answered is not None:
            check_confirmation_answers(message, session.events)
        for event in abandoned_call_events(session.events):
            await runner.session_service.append_event(session, event)
        invocation_id = answered if resume is None else resume.invocation_id
        inv = self._inv = Invocation(runner, session, self._run_config, invocation_id)
        if resume is not None:
            inv.plan = resume.replan(session.events)
            inv.start_agent = resume.start_agent
            inv.user_content = resume.record.latest_user_content()
        channel = EmitChannel()
        ctx = self._ctx = InvocationContext(invocation=inv, agent=runner.agent, send=channel)
        inv.root_ctx = ctx
        await self._append_user_event(inv, ctx)
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
        """Cancel and wait for the agents, and say whether ``exc`` was absorbed.

        A consumer that leaves while the agents still run gets no more events: the receive side
        closes first, so the aftermath (closing responses, error events) is stored only.
        """
        inv, runner, channel = self._inv, self._runner, self._channel
        if channel.sending:  # the agents still run (cancel() is not free: skip it if not)
            inv.cancel_scope.cancel(reason="the consumer left the run block")
            channel.close_receive()
        body_failure: BaseExceptionGroup[BaseException] | None = None
        suppress = False
        try:
            tb = None if exc is None else exc.__traceback__
            suppress = bool(await self._nursery.__aexit__(type(exc) if exc else None, exc, tb))
        except BaseExceptionGroup as group:
            body_failure = group
        finally:
            self._stream.close()
            if inv.open_calls:  # the aftermath timed out, or a commit raced with its end
                with trio.move_on_after(runner.cleanup_timeout, shield=True):
                    await inv.seal_quietly()
            if inv.agent_failure is None and runner.plugin_manager:
                with trio.move_on_after(runner.cleanup_timeout, shield=True):
                    await self._after_run(inv)
            inv.root_ctx = None  # no cycle left: the invocation is freed without the cyclic GC
        return _outcome(exc, suppress, body_failure, inv.agent_failure)

    async def _append_user_event(self, inv: Invocation, ctx: InvocationContext) -> None:
        message = self._message
        if message is None:  # resumed without a message
            if self._state_delta:
                await self._store(
                    inv,
                    Event(
                        invocation_id=inv.invocation_id,
                        author="user",
                        actions=EventActions(state_delta=self._state_delta),
                    ),
                )
            return
        plugins = self._runner.plugin_manager
        if plugins:
            message = await plugins.on_user_message(ctx, message) or message
        inv.user_content = message
        event = Event(
            invocation_id=inv.invocation_id,
            author="user",
            branch=answered_branch(message, inv.session.events),
            content=message,
            actions=EventActions(state_delta=self._state_delta or {}),
        )
        await self._store(inv, event)

    async def _store(self, inv: Invocation, event: Event) -> None:
        service = self._runner.session_service
        try:  # the lease was the run's checkpoint: an in-memory store commits without another
            committed = service.append_event_nowait(inv.session, event)
        except trio.WouldBlock:
            committed = await service.append_event(inv.session, event)
        if inv.plan is not None:
            inv.plan.observe(committed)

    async def _after_run(self, inv: Invocation) -> None:
        """R-PLG-8: ``after_run`` plugins after a run that did not fail; their failure is one."""
        try:
            await self._runner.plugin_manager.after_run(self._ctx)
        except PluginError as exc:
            await inv.notify_run_error(self._ctx, exc)
            raise


def _outcome(
    exc: BaseException | None,
    suppress: bool,
    body_failure: BaseExceptionGroup[BaseException] | None,
    agent_failure: Exception | None,
) -> bool:
    """What leaves the run block: the agents' failure and the body's, cancellations dropped.

    A lone failure keeps its type (the body's own exception goes on as it was raised); the
    agents' failure and the body's together leave as one group; cancellations alone go on as
    they were (an outer scope catches them), unless the agents failed too.
    """
    if body_failure is None:
        if agent_failure is None or (exc is not None and not suppress):
            return suppress
        raise agent_failure
    members = [body_failure] if agent_failure is None else [body_failure, agent_failure]
    combined = BaseExceptionGroup("the run failed", members)
    failure = without_cancelled(combined)
    if failure is combined:
        raise body_failure  # nothing but cancellations
    if failure is exc:
        return False  # the body's own failure goes on as it was raised
    raise failure from failure.__cause__


async def _read_session(service: SessionService, **where: Any) -> Session | None:
    """The session to run on, read without another checkpoint when the store allows it."""
    try:
        return service.get_session_nowait(**where)
    except trio.WouldBlock:
        return await service.get_session(**where)
