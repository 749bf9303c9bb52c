"""BaseAgent: identity, the agent tree, before/after callbacks and the run template."""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator
from contextlib import aclosing
from typing import Any, ClassVar, cast

import trio

from .._callbacks import CallbackSpec, callback_chain, plugins_then_chain, run_callback_chain
from .._content import Content
from .._context import CallbackContext, InvocationContext
from .._errors import AgentTimeoutError, ConfigurationError, PluginError
from .._events import Event, EventActions
from .._util import check_timeout

__all__ = ["BaseAgent"]

logger = logging.getLogger("trio_agents")

_AGENT_CALLBACK_PARAMS = ("callback_context",)


class BaseAgent:
    """The base of every agent.

    Override ``_run_async_impl`` in either form:

    * a coroutine that emits with ``await ctx.emit(event)`` (each call returns once the event is
      committed), or
    * an async generator that yields events (each one is emitted; the generator resumes after the
      commit). A generator must not open a nursery or cancel scope across a ``yield``.

    Run sub-agents with ``await sub.run(ctx)``. Subclasses may declare extra fields as annotated
    class attributes and receive them as keyword arguments, as with ADK's pydantic agents.
    ``timeout`` (seconds) bounds one run of the agent as a Trio cancel scope: past it the agent
    is cancelled, its open calls are closed as on cancel, and the run fails with
    :class:`~trio_agents.AgentTimeoutError` (in a ``ParallelAgent``, that branch fails).
    """

    _base_fields: ClassVar[frozenset[str]] = frozenset()

    def __init__(
        self,
        *,
        name: str,
        description: str = "",
        sub_agents: Iterable[BaseAgent] = (),
        before_agent_callback: CallbackSpec = None,
        after_agent_callback: CallbackSpec = None,
        timeout: float | None = None,
        **fields: Any,
    ) -> None:
        _check_name(name)
        self.name = name
        self.description = description
        self.timeout = check_timeout(timeout, f"agent {name!r}: timeout")
        """Seconds this agent may run (callbacks included), or None; past it the agent's scope
        is cancelled and the run fails with :class:`~trio_agents.AgentTimeoutError`."""
        self.parent_agent: BaseAgent | None = None
        self.before_agent_callback = before_agent_callback
        self.after_agent_callback = after_agent_callback
        self._set_fields(fields)
        self.sub_agents: list[BaseAgent] = []
        for child in sub_agents:
            self._adopt(child)

    # -- fields and the tree ---------------------------------------------------------------------

    def _set_fields(self, fields: dict[str, Any]) -> None:
        allowed = _declared_fields(type(self))
        for key, value in fields.items():
            if key not in allowed:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword {key!r}")
            setattr(self, key, value)

    def _adopt(self, child: BaseAgent) -> None:
        if not isinstance(child, BaseAgent):
            raise ConfigurationError(f"agent {self.name!r}: sub-agent {child!r} is not an agent")
        if child.parent_agent is not None:
            raise ConfigurationError(
                f"agent {child.name!r} already has parent {child.parent_agent.name!r}; "
                f"it cannot also be a sub-agent of {self.name!r}"
            )
        if any(c.name == child.name for c in self.sub_agents):
            raise ConfigurationError(f"agent {self.name!r} has two sub-agents named {child.name!r}")
        child.parent_agent = self
        self.sub_agents.append(child)

    @property
    def before_agent_callback(self) -> CallbackSpec:
        """Callbacks run before the agent (a ``Content`` answer skips it); settable."""
        return self._before_agent_spec

    @before_agent_callback.setter
    def before_agent_callback(self, value: CallbackSpec) -> None:
        self._before_chain = callback_chain(
            value,
            owner=f"agent {self.name!r}",
            field="before_agent_callback",
            params=_AGENT_CALLBACK_PARAMS,
        )
        self._before_agent_spec = value

    @property
    def after_agent_callback(self) -> CallbackSpec:
        """Callbacks run after the agent (a ``Content`` answer is emitted); settable."""
        return self._after_agent_spec

    @after_agent_callback.setter
    def after_agent_callback(self, value: CallbackSpec) -> None:
        self._after_chain = callback_chain(
            value,
            owner=f"agent {self.name!r}",
            field="after_agent_callback",
            params=_AGENT_CALLBACK_PARAMS,
        )
        self._after_agent_spec = value

    @property
    def root_agent(self) -> BaseAgent:
        """The top of this agent's tree."""
        agent = self
        while agent.parent_agent is not None:
            agent = agent.parent_agent
        return agent

    def find_agent(self, name: str) -> BaseAgent | None:
        """This agent or the descendant called ``name``."""
        return self if self.name == name else self.find_sub_agent(name)

    def find_sub_agent(self, name: str) -> BaseAgent | None:
        """The descendant called ``name`` (depth first), or None."""
        for agent in self._descendants():
            if agent.name == name:
                return agent
        return None

    def _descendants(self) -> Iterator[BaseAgent]:
        for child in self.sub_agents:
            yield child
            yield from child._descendants()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # -- running ---------------------------------------------------------------------------------

    def _run_async_impl(self, ctx: InvocationContext) -> Awaitable[None] | AsyncIterator[Event]:
        raise NotImplementedError(f"{type(self).__name__} must implement _run_async_impl")

    async def run(self, parent_ctx: InvocationContext) -> None:
        """Run this agent: before-callbacks, the implementation, after-callbacks (R-AG-1..4).

        When the agent hands off with a transfer, the target then runs in its place, on the same
        branch (a hand-off, not a nested call; chains are followed in a loop). In a resumable
        app the agent commits ``end_of_agent`` when it finishes without pausing; a resumed
        invocation skips the agents that did (following the hand-offs they made).
        """
        agent: BaseAgent | None = self
        plan = parent_ctx.resume_plan
        skipped: set[str] = set()
        while agent is not None:
            if plan is not None and plan.has_ended(agent) and agent.name not in skipped:
                skipped.add(agent.name)  # finished before the invocation was resumed
                agent = plan.transfer_of(agent)
                continue
            ctx = parent_ctx.for_agent(agent)
            if agent.timeout is None:
                agent = await agent._run_steps(ctx)
            else:
                agent = await agent._run_within(agent.timeout, ctx)

    async def _run_within(self, seconds: float, ctx: InvocationContext) -> BaseAgent | None:
        with trio.move_on_after(seconds):
            return await self._run_steps(ctx)
        # Only reached when the deadline cancelled the steps (their cleanup has run).
        error = AgentTimeoutError(agent=self.name, seconds=seconds)
        await self._report_failure(ctx, error)
        raise error

    async def _run_steps(self, ctx: InvocationContext) -> BaseAgent | None:
        if await self._before(ctx):
            return None
        resumable = ctx.is_resumable
        mark = ctx.pause_mark() if resumable else 0
        try:
            await self._run_impl(ctx)
        except Exception as exc:
            await self._report_failure(ctx, exc)
            raise
        except BaseException as exc:
            if _is_cancellation(exc):
                ctx.cancelled = True
                await self._after_cancelled(ctx)
            raise
        if resumable and not ctx.paused_since(mark):
            await ctx.emit(Event(author=self.name, actions=EventActions(end_of_agent=True)))
        if ctx.end_invocation:
            return None
        await self._after(ctx)
        return ctx.transfer_to

    async def _run_impl(self, ctx: InvocationContext) -> None:
        impl = self._run_async_impl(ctx)
        if inspect.isasyncgen(impl):
            async with aclosing(impl) as events:
                async for event in events:
                    await ctx.emit(cast(Event, event))
        elif inspect.isawaitable(impl):
            await impl
        else:
            raise ConfigurationError(
                f"agent {self.name!r}: _run_async_impl must be a coroutine or an async generator"
            )

    async def _before(self, ctx: InvocationContext) -> bool:
        plugins = ctx.plugin_manager
        if not (plugins or self._before_chain):
            return False
        cc = CallbackContext(ctx)
        result = await plugins_then_chain(
            plugins.before_agent(self, cc) if plugins else None,
            self._before_chain,
            callback_context=cc,
        )
        if result is not None:
            await ctx.emit(self._answered_before(self._callback_event(result, cc), cc))
            ctx.end_invocation = True
            return True
        if not cc.actions.is_empty():
            await ctx.emit(Event(author=self.name, actions=cc.actions.freeze()))
        return ctx.end_invocation

    async def _after(self, ctx: InvocationContext) -> None:
        plugins = ctx.plugin_manager
        if not (plugins or self._after_chain):
            return
        cc = CallbackContext(ctx)
        result = await plugins_then_chain(
            plugins.after_agent(self, cc) if plugins else None,
            self._after_chain,
            callback_context=cc,
        )
        if result is not None:
            await ctx.emit(self._callback_event(result, cc))
        elif not cc.actions.is_empty():
            await ctx.emit(Event(author=self.name, actions=cc.actions.freeze()))

    async def _after_cancelled(self, ctx: InvocationContext) -> None:
        """R-AG-3 [2.13]: after a cancellation the after-callbacks run best effort.

        Shielded and time-bounded; their results are ignored and nothing is emitted (the run is
        being cancelled); an exception they raise is logged, never raised over the cancellation.
        """
        plugins = ctx.plugin_manager
        if not (plugins or self._after_chain):
            return
        cc = CallbackContext(ctx)
        with trio.move_on_after(ctx.cleanup_timeout, shield=True):
            try:
                if plugins:
                    await plugins.after_agent(self, cc)
                await run_callback_chain(self._after_chain, callback_context=cc)
            except Exception:
                logger.exception("after-agent callback of %r failed during cancellation", self.name)

    async def _checkpoint(self, ctx: InvocationContext, state: dict[str, Any]) -> None:
        """Commit where this (workflow) agent stands, for a resumed invocation to continue from;
        only in a resumable app."""
        await ctx.emit(Event(author=self.name, actions=EventActions(agent_state=state)))

    def _answered_before(self, event: Event, cc: CallbackContext) -> Event:
        """The event of a before-agent callback's answer, as this kind of agent commits it."""
        return event

    def _callback_event(self, result: object, cc: CallbackContext) -> Event:
        if not isinstance(result, Content):
            raise ConfigurationError(
                f"agent {self.name!r}: an agent callback must return Content or None, "
                f"got {type(result).__name__}"
            )
        return Event(author=self.name, content=result, actions=cc.actions.freeze())

    async def _report_failure(self, ctx: InvocationContext, exc: Exception) -> None:
        ctx.record_failure(exc)
        plugins = ctx.plugin_manager
        if plugins:
            try:
                # Shielded: a cancellation arriving now must not replace the error.
                with trio.move_on_after(ctx.cleanup_timeout, shield=True):
                    await plugins.on_agent_error(self, CallbackContext(ctx), exc)
            except PluginError as hook_failure:
                exc.add_note(f"also: {hook_failure} ({hook_failure.__cause__!r})")


def _is_cancellation(exc: BaseException) -> bool:
    """True for ``trio.Cancelled`` or a group made only of cancellations."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_cancellation(e) for e in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigurationError(
            f"invalid agent name {name!r}: an agent name must be a Python identifier"
        )
    if name == "user":
        raise ConfigurationError("invalid agent name 'user': it is reserved for end-user input")


_FIELDS: dict[type, frozenset[str]] = {}


def _declared_fields(cls: type[BaseAgent]) -> frozenset[str]:
    cached = _FIELDS.get(cls)
    if cached is not None:
        return cached
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is BaseAgent or klass is object:
            continue
        names.update(getattr(klass, "__annotations__", {}))
    _FIELDS[cls] = found = frozenset(names)
    return found
