"""One invocation: its shared state, the commit of each event, the agents' task and its end.

The consumer's task commits (:meth:`Invocation.commit` / :meth:`Invocation.commit_inline`, called
by :class:`~trio_agents.RunStream`); the agents run in :meth:`Invocation.drive`, one task in the
invocation's nursery, which also delivers the aftermath (:mod:`trio_agents._aftermath`) once the
agents have stopped. How events are committed is chosen once, when the invocation is created.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs
import trio

from . import _aftermath
from ._aftermath import OpenCall
from ._emit_channel import BARRIER, EmitChannel
from ._errors import PluginError
from ._events import Event, EventActions
from ._ids import new_invocation_id
from ._state import WriteClock
from .agents._transfer import route
from .sessions._base import SessionService

if TYPE_CHECKING:
    from ._config import RunConfig
    from ._content import Content
    from ._context import InvocationContext
    from ._resume_plan import ResumePlan
    from ._runner import Runner
    from .agents._base import BaseAgent
    from .sessions._base import Session

__all__: list[str] = []  # internal: the run block and contexts use Invocation

logger = logging.getLogger("trio_agents")


class Invocation:
    """The shared state of one invocation: session, counters, open calls, cancel scope."""

    __slots__ = (
        "_clock",
        "agent_failure",
        "cancel_scope",
        "commits_inline",
        "emitted",
        "failure_sites",
        "invocation_id",
        "llm_calls",
        "open_calls",
        "pauses",
        "plan",
        "resumable",
        "root_ctx",
        "run_config",
        "runner",
        "session",
        "start_agent",
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
        """Events the consumer has taken so far (a loop pass that emitted none still yields)."""
        self.llm_calls = 0
        self.open_calls: dict[str, OpenCall] = {}
        self.agent_failure: Exception | None = None
        self.failure_sites: dict[int, tuple[BaseException, str, str | None]] = {}
        """Where each failure happened, by ``id`` of the exception (held, so ids stay unique)."""
        self.root_ctx: InvocationContext | None = None
        self._clock: WriteClock | None = None
        self.resumable = runner.resumable
        """Whether agents commit checkpoints (``agent_state`` / ``end_of_agent``)."""
        self.plan: ResumePlan | None = None
        """Where a resumed invocation stands (None for a new one), kept current at each commit."""
        self.start_agent: BaseAgent | None = None
        """The agent a resumed invocation started with (a new one routes, R-XFER-8)."""
        self.pauses: list[str | None] = []
        """The branch of each committed event that makes the invocation wait for the client."""
        self.commits_inline = (
            not runner.plugin_manager.sees_events
            and not run_config.custom_metadata
            and _appends_inline(runner.session_service)
        )
        """No ``on_event`` plugin, no custom metadata and a store that appends without I/O: events
        are committed as emitted, without a checkpoint (:meth:`commit_inline`)."""

    @property
    def write_clock(self) -> WriteClock:
        """The order of this invocation's state writes (made when the first write needs it)."""
        if self._clock is None:
            self._clock = WriteClock()
        return self._clock

    def record_failure(self, exc: BaseException, agent: str, branch: str | None) -> None:
        """Remember where ``exc`` first failed (the innermost agent), for its error event."""
        self.failure_sites.setdefault(id(exc), (exc, agent, branch))

    # -- consumer side: commit ------------------------------------------------------------------

    def commit_inline(self, event: Event) -> Event:
        """Commit without a checkpoint (only when :attr:`commits_inline`)."""
        if event.partial:
            return event
        if self._clock is not None and event.actions.state_delta:
            event = self._settled(event)
        committed = self.runner.session_service.append_event_nowait(self.session, event)
        if committed.content is not None:
            self._track_calls(committed)
        if self.plan is not None:
            self.plan.observe(committed)
        return committed

    async def commit(self, event: Event) -> Event:
        """Run ``on_event`` plugins, then append ``event`` unless partial; return it as stored."""
        clock = self._clock
        since = clock.now if clock is not None else 0
        if event.actions.state_delta and not event.partial:
            event = self._settled(event)
        event = self._with_metadata(event)
        if self.runner.plugin_manager.sees_events:
            event = await self._on_event(event)
        if event.partial:
            return event
        committed = await self.runner.session_service.append_event(self.session, event)
        if self._clock is not None and self._clock.now != since and event.actions.state_delta:
            # Writes made while the event was stored are newer than its own: keep them live.
            self._clock.restore(self.session.state, event.actions.state_delta, since)
        if committed.content is not None:
            self._track_calls(committed)
        if self.plan is not None:
            self.plan.observe(committed)
        return committed

    def _settled(self, event: Event) -> Event:
        """``event`` without the state writes that a later write replaced (:class:`WriteClock`)."""
        if self._clock is None:
            return event  # no write was timed yet: nothing can have been replaced
        kept = self._clock.settle(event.actions.state_delta)
        if kept is None:
            return event
        return attrs.evolve(event, actions=attrs.evolve(event.actions, state_delta=kept))

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
        return _merged_replacement(event, replaced)

    def _track_calls(self, event: Event) -> None:
        assert event.content is not None
        waiting = event.long_running_tool_ids or ()
        if waiting:
            self.pauses.append(event.branch)
        for part in event.content.parts:
            call = part.function_call
            if call is not None and call.id and call.id not in waiting:
                self.open_calls[call.id] = OpenCall(event.author, event.branch, call.name)
            response = part.function_response
            if response is not None and response.id:
                self.open_calls.pop(response.id, None)

    # -- agent side: drive ------------------------------------------------------------------------

    async def drive(self, ctx: InvocationContext, channel: EmitChannel) -> None:
        """Run the root agent (or a ``before_run`` short-circuit), then deliver the aftermath.

        A failure does not leave this task: it is recorded as :attr:`agent_failure`, its error
        event is committed and delivered after everything committed before it, and the run block
        raises it once the consumer has had every event (ARCHITECTURE §2 rule 6).
        """
        ended = False
        try:
            try:
                with self.cancel_scope:  # the agents only: the consumer's block is not cancelled
                    await self._run_agents(ctx)
            except Exception as exc:
                self.agent_failure = exc  # reported after its error event is delivered
            ended = self.agent_failure is None and not self.cancel_scope.cancelled_caught
        finally:  # also when a scope around the run is cancelled
            try:
                await self._deliver_aftermath(channel, ended)
                if self.agent_failure is not None:
                    await self.notify_run_error(ctx, self.agent_failure)
            finally:  # closes without a checkpoint, so a cancellation cannot mask an error
                channel.close_send()

    async def _run_agents(self, ctx: InvocationContext) -> None:
        toolsets = self.runner._toolset_host.for_invocation()
        if toolsets is not None:  # the toolsets' connections live in this scope (or the Runner's)
            async with toolsets:
                await self._run_root_agent(ctx)
        else:
            await self._run_root_agent(ctx)

    async def _run_root_agent(self, ctx: InvocationContext) -> None:
        plugins = self.runner.plugin_manager
        content = await plugins.before_run(ctx) if plugins else None
        if content is not None:
            await ctx.emit(Event(author="model", content=content))
        else:
            agent = self.start_agent
            if agent is None:
                agent, branch = route(ctx.agent, self.session.events)
                if branch is not None:  # the answer goes back where its call was made
                    ctx = ctx.for_branch(branch)
            await agent.run(ctx)

    async def notify_run_error(self, ctx: InvocationContext, exc: Exception) -> None:
        """``on_run_error`` plugins, shielded and bounded; their own failure becomes a note."""
        plugins = self.runner.plugin_manager
        if not plugins:
            return
        try:
            with trio.move_on_after(self.runner.cleanup_timeout, shield=True):
                await plugins.on_run_error(ctx, exc)
        except PluginError as hook_failure:
            exc.add_note(f"also: {hook_failure} ({hook_failure.__cause__!r})")

    # -- aftermath --------------------------------------------------------------------------------

    async def _deliver_aftermath(self, channel: EmitChannel, ended: bool) -> None:
        """Commit a response for every call left open, then one error event per failure, and
        hand each to the consumer while it is there (shielded, within ``cleanup_timeout``).

        A run that ended on its own has nothing in flight; a cancelled or failed one may have an
        event still being committed, so a barrier first waits for the consumer to finish it.
        Each event is committed through the consumer like any other (``on_event`` plugins
        included); once the consumer is gone, the rest is stored only.
        """
        if ended and not self.open_calls and self.agent_failure is None:
            return  # the common end: nothing in flight, nothing to close (no scope to open)
        with trio.move_on_after(self.runner.cleanup_timeout, shield=True):
            deliver = ended or await _barrier(channel)
            if not (self.open_calls or self.agent_failure is not None):
                return
            events = [*self._closing_events(self._end_reason(ended)), *self._error_events()]
            for event in events:
                if not (deliver and await self._deliver(channel, event)):
                    deliver = False
                    await self._append_quietly(event)

    def _end_reason(self, ended: bool) -> str:
        if self.agent_failure is not None:
            return f"run failed: {type(self.agent_failure).__name__}"
        return "run ended" if ended else "run cancelled"

    def _closing_events(self, reason: str) -> list[Event]:
        events = _aftermath.closing_events(self.open_calls, reason, self.invocation_id)
        self.open_calls.clear()
        return events

    def _error_events(self) -> list[Event]:
        return _aftermath.error_events(
            self.agent_failure, self.failure_sites, self.runner.agent.name, self.invocation_id
        )

    async def _deliver(self, channel: EmitChannel, event: Event) -> bool:
        """Commit ``event`` through the consumer, as any event; False if it was not stored."""
        try:
            await channel.send(event)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # the consumer is gone
        except Exception:
            logger.exception("could not commit the aftermath event of %s", self.invocation_id)
            return False
        return True

    async def seal_quietly(self) -> None:
        """Store closing responses for calls still open (the aftermath timed out): stored only."""
        for event in self._closing_events(self._end_reason(False)):
            await self._append_quietly(event)

    async def _append_quietly(self, event: Event) -> Event | None:
        try:
            return await self.runner.session_service.append_event(self.session, event)
        except Exception:
            logger.exception("could not store the aftermath event of %s", self.invocation_id)
            return None


def _appends_inline(service: SessionService) -> bool:
    """Whether ``service`` commits without I/O (it overrides ``append_event_nowait``)."""
    return type(service).append_event_nowait is not SessionService.append_event_nowait


async def _barrier(channel: EmitChannel) -> bool:
    """Wait until every event sent before now is committed; False if the consumer is gone."""
    try:
        await channel.send(_BARRIER_EVENT, BARRIER)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return False
    return True


_BARRIER_EVENT = Event(author="runner")


_IDENTITY = frozenset({"id", "invocation_id", "timestamp"})


def _merged_replacement(event: Event, replaced: Event) -> Event:
    """An on-event hook's replacement as ADK 2.13 applies it: the fields the replacement sets
    (its values other than the defaults) over the original event, whose identity (id,
    invocation id, timestamp) is kept (ARCHITECTURE §4)."""
    changes = {
        field.name: value
        for field in attrs.fields(Event)
        if field.name not in _IDENTITY
        and (value := getattr(replaced, field.name)) is not None
        and value != ""
        and not (isinstance(value, EventActions) and value.is_empty())
    }
    return attrs.evolve(event, **changes)
