"""Invocation, callback and read-only contexts, and the agent side of the handshake.

An agent hands an event to the Runner with ``await ctx.emit(event)``: the event travels over the
invocation's zero-buffer emit channel (:mod:`trio_agents._emit_channel`); the Runner commits it,
hands it to the consumer and answers the sender; ``emit`` returns the committed event. One event
is in flight per producer, and a producer resumes only after its event is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import attrs

from ._content import EMPTY, Content, Part
from ._emit_channel import EmitChannel
from ._errors import ConfigurationError, LlmCallLimitError
from ._events import Event, EventActions, replace, stamped
from ._ids import new_function_call_id
from ._state import State, Watched, WriteClock, collect_mutations
from ._tool_confirmation import ToolConfirmation

if TYPE_CHECKING:
    from ._config import RunConfig
    from ._invocation import Invocation
    from ._resume_plan import ResumePlan
    from .agents._base import BaseAgent
    from .artifacts._base import ArtifactService
    from .memory import SearchMemoryResponse
    from .memory._base import MemoryService
    from .plugins._manager import PluginManager
    from .sessions._base import Session, SessionService

__all__ = [
    "CallbackContext",
    "EventActionsDraft",
    "InvocationContext",
    "ReadonlyContext",
]

EscalationWatcher = Callable[["BaseAgent"], None]


@attrs.define(kw_only=True)
class EventActionsDraft:
    """The mutable actions a context accumulates before they ride on an event.

    Tools and callbacks write ``ctx.actions.escalate = True`` or
    ``ctx.actions.transfer_to_agent = "x"`` as in ADK; state writes go through ``ctx.state``.
    """

    _state_delta: dict[str, Any] = attrs.field(factory=dict, alias="state_delta")
    artifact_delta: dict[str, int] = attrs.field(factory=dict)
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    skip_summarization: bool | None = None
    requested_auth_configs: dict[str, Any] = attrs.field(factory=dict)
    requested_tool_confirmations: dict[str, ToolConfirmation] = attrs.field(factory=dict)
    """Confirmations asked for, by function call id (``ToolContext.request_confirmation``)."""
    end_of_agent: bool | None = None
    agent_state: dict[str, Any] | None = None
    watched: Watched = attrs.field(factory=dict, repr=False)
    """Containers read through this draft's state views, checked for in-place changes."""
    times: dict[str, int] = attrs.field(factory=dict, repr=False)
    """When each pending write was made (by the invocation's :class:`WriteClock`)."""
    clock: WriteClock | None = attrs.field(default=None, repr=False)

    @property
    def state_delta(self) -> dict[str, Any]:
        """The pending state writes, including containers changed in place since read (R-ST-2)."""
        if self.watched:
            for key in collect_mutations(self.watched, self._state_delta):
                if self.clock is not None:
                    self.times[key] = self.clock.tick(key, self._state_delta[key])
        return self._state_delta

    def state_view(self, live: dict[str, Any], clock: WriteClock | None = None) -> State:
        """A write-through :class:`State` over ``live`` that records into this draft.

        With ``clock`` (the invocation's), each write is timed, so that committing it can never
        bring back a value that a later write replaced.
        """
        if clock is not None:
            self.clock = clock
        return State(live, self.state_delta, self.watched, self.times, self.clock)

    def _carried(self, actions: EventActions, own: Mapping[str, Any] = EMPTY) -> EventActions:
        """``actions`` (built from this draft) with the write times of its delta on the clock;
        keys in ``own`` were set on the event itself, so they are written at commit."""
        if self.clock is not None and self.times:
            times = {k: t for k, t in self.times.items() if k not in own} if own else self.times
            self.clock.carry(actions.state_delta, times)
        return actions

    def is_empty(self) -> bool:
        """True when these actions change nothing."""
        return not (
            self.state_delta
            or self.artifact_delta
            or self.transfer_to_agent
            or self.escalate
            or self.skip_summarization
            or self.requested_auth_configs
            or self.requested_tool_confirmations
            or self.end_of_agent is not None
            or self.agent_state is not None
        )

    def freeze(self) -> EventActions:
        """An immutable :class:`EventActions` with the current values."""
        return self._carried(self._frozen())

    def _frozen(self) -> EventActions:
        return EventActions(
            state_delta=dict(self.state_delta),
            artifact_delta=dict(self.artifact_delta),
            transfer_to_agent=self.transfer_to_agent,
            escalate=self.escalate,
            skip_summarization=self.skip_summarization,
            requested_auth_configs=dict(self.requested_auth_configs),
            requested_tool_confirmations=dict(self.requested_tool_confirmations),
            end_of_agent=self.end_of_agent,
            agent_state=self.agent_state,
        )

    def merged_into(self, actions: EventActions) -> EventActions:
        """``actions`` with this draft merged under it (the event's own values win)."""
        return self._carried(self._merged_into(actions), actions.state_delta)

    def _merged_into(self, actions: EventActions) -> EventActions:
        return EventActions(
            state_delta={**self.state_delta, **actions.state_delta},
            artifact_delta={**self.artifact_delta, **actions.artifact_delta},
            transfer_to_agent=actions.transfer_to_agent or self.transfer_to_agent,
            escalate=actions.escalate if actions.escalate is not None else self.escalate,
            skip_summarization=(
                actions.skip_summarization
                if actions.skip_summarization is not None
                else self.skip_summarization
            ),
            requested_auth_configs={
                **self.requested_auth_configs,
                **actions.requested_auth_configs,
            },
            requested_tool_confirmations={
                **self.requested_tool_confirmations,
                **actions.requested_tool_confirmations,
            },
            end_of_agent=(
                actions.end_of_agent if actions.end_of_agent is not None else self.end_of_agent
            ),
            agent_state=actions.agent_state
            if actions.agent_state is not None
            else self.agent_state,
        )


class InvocationContext:
    """Everything an agent run needs: the live session, the services and the emit channel.

    Each agent run gets its own copy (``agent`` set to the running agent); the session, the
    services and the invocation's counters are shared by all copies. ``end_invocation`` is scoped
    to one copy (R-AG-4).
    """

    __slots__ = (
        "_actions",
        "_escalation_watchers",
        "_invocation",
        "_send",
        "agent",
        "branch",
        "cancelled",
        "end_invocation",
        "transfer_to",
    )

    def __init__(
        self,
        *,
        invocation: Invocation,
        agent: BaseAgent,
        send: EmitChannel,
        branch: str | None = None,
    ) -> None:
        self._invocation = invocation
        self._send = send
        self._actions: EventActionsDraft | None = None
        self._escalation_watchers: tuple[EscalationWatcher, ...] = ()
        self.agent = agent
        self.branch = branch
        self.end_invocation = False
        self.cancelled = False
        """True once this agent's run was cancelled (its after-callbacks then run best effort)."""
        self.transfer_to: BaseAgent | None = None

    # -- shared invocation data ------------------------------------------------------------------

    @property
    def invocation_id(self) -> str:
        """The id of the invocation (every event it commits carries it)."""
        return self._invocation.invocation_id

    @property
    def session(self) -> Session:
        """The live session: history and state as committed so far, plus pending writes."""
        return self._invocation.session

    @property
    def app_name(self) -> str:
        """The app the session belongs to."""
        return self._invocation.session.app_name

    @property
    def user_id(self) -> str:
        """The user the session belongs to."""
        return self._invocation.session.user_id

    @property
    def user_content(self) -> Content | None:
        """The user message that started the invocation (after ``on_user_message`` plugins)."""
        return self._invocation.user_content

    @property
    def run_config(self) -> RunConfig:
        """The settings of this run."""
        return self._invocation.run_config

    @property
    def session_service(self) -> SessionService:
        """The Runner's session service."""
        return self._invocation.runner.session_service

    @property
    def artifact_service(self) -> ArtifactService | None:
        """The Runner's artifact service, or None."""
        return self._invocation.runner.artifact_service

    @property
    def memory_service(self) -> MemoryService | None:
        """The Runner's memory service, or None."""
        return self._invocation.runner.memory_service

    @property
    def cleanup_timeout(self) -> float:
        """Seconds that shielded clean-up (after-callbacks on cancellation, hooks) may take."""
        return self._invocation.runner.cleanup_timeout

    @property
    def events_emitted(self) -> int:
        """How many events the invocation has committed so far (partial ones included)."""
        return self._invocation.emitted

    @property
    def run_cancelled(self) -> bool:
        """Whether the invocation's run was cancelled (``cancel()``, the consumer leaving)."""
        return self._invocation.cancel_scope.cancelled_caught

    @property
    def is_resumable(self) -> bool:
        """Whether the app is resumable: agents then commit checkpoints as they go."""
        return self._invocation.resumable

    @property
    def resume_plan(self) -> ResumePlan | None:
        """Where a resumed invocation stands (None when the invocation is new)."""
        return self._invocation.plan

    def pause_mark(self) -> int:
        """A mark for :meth:`paused_since`: how many pausing events were committed so far."""
        return len(self._invocation.pauses)

    def paused_since(self, mark: int) -> bool:
        """Whether an event committed on this context's branch (or a branch under it) since
        ``mark`` made the invocation wait for the client: a long-running call or a
        confirmation request. The agents that contain it stop scheduling (they pause)."""
        pauses = self._invocation.pauses
        if len(pauses) == mark:
            return False
        return any(_under(branch, self.branch) for branch in pauses[mark:])

    def mark_paused(self) -> None:
        """Say that the running agent still waits for the client (resumed without an answer)."""
        self._invocation.pauses.append(self.branch)

    def increment_llm_call_count(self) -> None:
        """Count one model call of the running agent; raises
        :class:`~trio_agents.LlmCallLimitError` when ``RunConfig.max_llm_calls`` is reached."""
        inv = self._invocation
        limit = inv.run_config.max_llm_calls
        if limit > 0 and inv.llm_calls >= limit:
            raise LlmCallLimitError(
                f"max_llm_calls={limit} reached: agent {self.agent.name!r} would make call "
                f"{inv.llm_calls + 1} in invocation {inv.invocation_id}"
            )
        inv.llm_calls += 1

    @property
    def plugin_manager(self) -> PluginManager:
        """The Runner's plugins (falsy when there are none)."""
        return self._invocation.runner.plugin_manager

    # -- pending writes ----------------------------------------------------------------------------

    @property
    def actions(self) -> EventActionsDraft:
        """Pending actions, merged into the next event this context emits."""
        if self._actions is None:
            self._actions = EventActionsDraft()
        return self._actions

    @property
    def state(self) -> State:
        """Write-through state; writes ride on the next event this context emits (R-ST-1)."""
        inv = self._invocation
        return self.actions.state_view(inv.session.state, inv.write_clock)

    # -- copies ------------------------------------------------------------------------------------

    def _copy(
        self, *, agent: BaseAgent | None = None, branch: str | None = None
    ) -> InvocationContext:
        ctx = InvocationContext.__new__(InvocationContext)
        ctx._invocation = self._invocation
        ctx._send = self._send
        ctx._actions = None
        ctx._escalation_watchers = self._escalation_watchers
        ctx.agent = self.agent if agent is None else agent
        ctx.branch = self.branch if branch is None else branch
        ctx.end_invocation = False
        ctx.cancelled = False
        ctx.transfer_to = None
        return ctx

    def for_agent(self, agent: BaseAgent) -> InvocationContext:
        """The copy an agent runs on: same branch, ``agent`` set, ``end_invocation`` cleared."""
        return self._copy(agent=agent)

    def for_branch(self, branch: str) -> InvocationContext:
        """A copy on another branch (used by :class:`ParallelAgent`)."""
        return self._copy(branch=branch)

    def watching_escalation(self, watcher: EscalationWatcher) -> InvocationContext:
        """A copy whose committed escalations also call ``watcher(author_agent)``."""
        ctx = self._copy()
        ctx._escalation_watchers = (*self._escalation_watchers, watcher)
        return ctx

    # -- the handshake ----------------------------------------------------------------------------

    def emit(self, event: Event) -> Coroutine[Any, Any, Event]:
        """Send ``event`` to the Runner and wait until it is committed; return the committed event.

        ``await ctx.emit(event)``. Fills ``author``, ``invocation_id`` and ``branch`` when
        missing, gives function calls without an id an ``adk-`` id, and merges this context's
        pending actions into the event. When the ``await`` returns, the event is in the session
        history, its state delta is in ``ctx.session.state`` and the consumer has received it.
        Partial events are delivered but never committed. A checkpoint: if cancelled before the
        Runner took the event, it is withdrawn; if cancelled after, it is committed all the same.

        (A plain method returning the channel's coroutine, one frame less per event than an
        ``async def`` around it; checks and stamping happen at the call.)
        """
        if not isinstance(event, Event):
            raise ConfigurationError(
                f"agent {self.agent.name!r} emitted {type(event).__name__}, not an Event"
            )
        event = self._stamp(event)
        return self._send.send(event, self._on_commit if self._escalation_watchers else None)

    @property
    def write_clock(self) -> WriteClock:
        """The order of this invocation's state writes (shared by every branch)."""
        return self._invocation.write_clock

    def record_failure(self, exc: BaseException) -> None:
        """Name this context's agent and branch as where ``exc`` failed (innermost agent wins);
        the invocation's error event for ``exc`` carries them."""
        self._invocation.record_failure(exc, self.agent.name, self.branch)

    def _on_commit(self, committed: Event) -> None:
        if committed.actions.escalate and not committed.partial:
            for watcher in self._escalation_watchers:
                watcher(self.agent)

    def _stamp(self, event: Event) -> Event:
        branch = self.branch
        if self._actions is None and event.content is None:  # the common case, in one pass
            branched = event.branch is not None or branch is None
            if event.author and event.invocation_id and branched:
                return event
            return stamped(event, self.agent.name, self._invocation.invocation_id, branch)
        changes: dict[str, Any] = {}
        if not event.author:
            changes["author"] = self.agent.name
        if not event.invocation_id:
            changes["invocation_id"] = self._invocation.invocation_id
        if event.branch is None and self.branch is not None:
            changes["branch"] = self.branch
        pending = self._actions
        if pending is not None and not pending.is_empty() and not event.partial:
            changes["actions"] = pending.merged_into(event.actions)
            self._actions = None
        content = event.content
        if content is not None and any(
            p.function_call is not None and not p.function_call.id for p in content.parts
        ):
            changes["content"] = with_call_ids(content)
        return replace(event, changes) if changes else event


def _under(branch: str | None, ancestor: str | None) -> bool:
    """Whether ``branch`` is ``ancestor`` or a branch under it (None is the top)."""
    if ancestor is None or branch == ancestor:
        return True
    return branch is not None and branch.startswith(ancestor + ".")


def with_call_ids(content: Content | None) -> Content | None:
    """``content`` with an ``adk-`` id given to each function call that has none; the
    same object when every call has one."""
    if content is None or not any(
        p.function_call is not None and not p.function_call.id for p in content.parts
    ):
        return content
    parts = tuple(
        replace(p, {"function_call": replace(p.function_call, {"id": new_function_call_id()})})
        if p.function_call is not None and not p.function_call.id
        else p
        for p in content.parts
    )
    return replace(content, {"parts": parts})


class ReadonlyContext:
    """A read-only view of the invocation, for instruction providers and the like."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: InvocationContext) -> None:
        self._ctx = ctx

    @property
    def invocation_id(self) -> str:
        """The id of the invocation."""
        return self._ctx.invocation_id

    @property
    def agent_name(self) -> str:
        """The name of the running agent."""
        return self._ctx.agent.name

    @property
    def branch(self) -> str | None:
        """The running agent's branch (``parallel.child`` segments), or None."""
        return self._ctx.branch

    @property
    def user_content(self) -> Content | None:
        """The user message that started the invocation."""
        return self._ctx.user_content

    @property
    def state(self) -> Mapping[str, Any]:
        """The live session state, read-only."""
        return MappingProxyType(self._ctx.session.state)

    @property
    def session(self) -> Session:
        """The live session (read it; write state through ``state``)."""
        return self._ctx.session

    @property
    def user_id(self) -> str:
        """The id of the user the invocation runs for."""
        return self._ctx.user_id

    @property
    def run_config(self) -> RunConfig:
        """The run configuration of the invocation."""
        return self._ctx.run_config


class CallbackContext(ReadonlyContext):
    """The context of agent, model and tool callbacks: write-through state and pending actions.

    Writes accumulate in :attr:`actions`; the framework puts them on the event that the callback
    produces (or on a content-less event of their own).
    """

    __slots__ = ("_actions",)

    def __init__(self, ctx: InvocationContext, actions: EventActionsDraft | None = None) -> None:
        super().__init__(ctx)
        self._actions = EventActionsDraft() if actions is None else actions

    @property
    def state(self) -> State:
        return self._actions.state_view(self._ctx.session.state, self._ctx.write_clock)

    @property
    def actions(self) -> EventActionsDraft:
        """The pending actions this callback or tool adds to its event (escalate, transfer...)."""
        return self._actions

    @property
    def cancelled(self) -> bool:
        """True in after-agent callbacks that run because the agent was cancelled (R-AG-3)."""
        return self._ctx.cancelled

    @property
    def invocation_context(self) -> InvocationContext:
        """The invocation context this context belongs to."""
        return self._ctx

    # -- artifacts (R-ART-3) -------------------------------------------------------------------

    def _artifacts(self) -> Any:
        service = self._ctx.artifact_service
        if service is None:
            raise ConfigurationError("Artifact service is not initialized.")
        return service

    async def save_artifact(
        self, filename: str, artifact: Part, custom_metadata: Mapping[str, Any] | None = None
    ) -> int:
        """Store a new version now (with ``custom_metadata``, if any); record it in this
        context's ``artifact_delta``."""
        session = self._ctx.session
        version: int = await self._artifacts().save_artifact(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            filename=filename,
            artifact=artifact,
            custom_metadata=custom_metadata,
        )
        self._actions.artifact_delta[filename] = version
        return version

    async def load_artifact(self, filename: str, version: int | None = None) -> Part | None:
        """The latest (or a given) version of an artifact of this session or user."""
        session = self._ctx.session
        part: Part | None = await self._artifacts().load_artifact(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            filename=filename,
            version=version,
        )
        return part

    async def search_memory(self, query: str) -> SearchMemoryResponse:
        """What the user's remembered sessions say about ``query`` (the Runner's memory)."""
        service = self._ctx.memory_service
        if service is None:
            raise ConfigurationError("no memory service: pass memory_service= to the Runner")
        session = self._ctx.session
        found: SearchMemoryResponse = await service.search_memory(
            app_name=session.app_name, user_id=session.user_id, query=query
        )
        return found

    async def list_artifacts(self) -> list[str]:
        """The filenames visible from this session."""
        session = self._ctx.session
        keys: list[str] = await self._artifacts().list_artifact_keys(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id
        )
        return keys

    @property
    def end_invocation(self) -> bool:
        """Set True to end the invocation after this callback (ADK's ``end_invocation``)."""
        return self._ctx.end_invocation

    @end_invocation.setter
    def end_invocation(self, value: bool) -> None:
        self._ctx.end_invocation = value
