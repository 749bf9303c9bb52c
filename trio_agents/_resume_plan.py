"""Where a resumed invocation stands: which agents ended, checkpoints, last events, answers.

Built from the invocation's stored events (:meth:`ResumePlan.of`) and kept up to date as the
resumed run commits (:meth:`ResumePlan.observe`); agents ask it where to continue.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ._aftermath import is_closing_response
from ._content import FunctionCall

if TYPE_CHECKING:
    from ._events import Event
    from ._resume import InvocationRecord
    from .agents._base import BaseAgent

__all__: list[str] = []  # internal: the run block and agents use ResumePlan


class ResumePlan:
    """Where a resumed invocation stands, kept up to date as the resumed run commits.

    Keyed by agent name: which agents ended, each workflow agent's last checkpoint, each agent's
    last content event and last event with function calls, the call ids that have a result (a
    tool's response or the user's answer; the runtime's closing responses do not count) and the
    transfers made. A checkpoint that starts a sub-agent forgets what that sub-agent and its
    descendants did before (a loop's next pass starts them afresh).
    """

    __slots__ = (
        "answered",
        "ended",
        "escalated",
        "last_calls",
        "last_own",
        "root",
        "seen",
        "states",
        "transfers",
        "user_answers",
    )

    def __init__(self, root: BaseAgent) -> None:
        self.root = root
        self.ended: set[str] = set()
        self.states: dict[str, Mapping[str, Any]] = {}
        self.last_own: dict[str, tuple[int, Event]] = {}
        self.last_calls: dict[str, Event] = {}
        self.transfers: dict[str, str] = {}
        self.escalated: set[str] = set()
        """Loops and parallel agents an escalation ended (before they could commit their end)."""
        self.answered: set[str] = set()
        self.user_answers: dict[str, int] = {}
        """The position of the newest user answer to each call id."""
        self.seen = 0

    @classmethod
    def of(cls, root: BaseAgent, record: InvocationRecord) -> ResumePlan:
        """The plan of a stored invocation."""
        plan = cls(root)
        for event in record.events:
            plan.observe(event)
        return plan

    def observe(self, event: Event) -> None:
        """Take a committed event of the invocation into account."""
        self.seen += 1
        author, actions = event.author, event.actions
        if author == "user":
            self._observe_answers(event)
            return
        if actions.agent_state is not None:
            self._start_checkpoint(author, actions.agent_state)
        if actions.end_of_agent:
            self.ended.add(author)
            self.states.pop(author, None)
        if actions.transfer_to_agent:
            self.transfers[author] = actions.transfer_to_agent
        if actions.escalate and not event.partial:
            self._escalate(author)
        if event.content is None or event.partial:
            return
        self.last_own[author] = (self.seen, event)
        if event.get_function_calls():
            self.last_calls[author] = event
        for response in event.get_function_responses():
            if response.id and not is_closing_response(response):
                self.answered.add(response.id)

    def _observe_answers(self, event: Event) -> None:
        for response in event.get_function_responses():
            if response.id:
                self.answered.add(response.id)
                self.user_answers[response.id] = self.seen

    def _start_checkpoint(self, author: str, state: Mapping[str, Any]) -> None:
        self.states[author] = state
        self.ended.discard(author)
        current = state.get("current_sub_agent")
        owner = self.root.find_agent(author)
        if owner is None:
            return
        if isinstance(current, str) and current:
            child = owner.find_sub_agent(current)
            if child is not None:
                self._forget(child)
        elif not state:  # a parallel agent starting: every branch starts afresh
            for child in owner.sub_agents:
                self._forget(child)

    def _escalate(self, author: str) -> None:
        """An escalation ends every enclosing loop, and the parallel agent of a direct child."""
        from .agents._loop import LoopAgent
        from .agents._parallel import ParallelAgent

        agent = self.root.find_agent(author)
        parent = None if agent is None else agent.parent_agent
        if isinstance(parent, ParallelAgent):
            self.escalated.add(parent.name)
        while parent is not None:
            if isinstance(parent, LoopAgent):
                self.escalated.add(parent.name)
            parent = parent.parent_agent

    def _forget(self, agent: BaseAgent) -> None:
        for name in _names(agent):
            self.ended.discard(name)
            self.escalated.discard(name)
            self.states.pop(name, None)
            self.last_own.pop(name, None)
            self.last_calls.pop(name, None)
            self.transfers.pop(name, None)

    # -- questions agents ask -------------------------------------------------------------------

    def has_ended(self, agent: BaseAgent) -> bool:
        """Whether ``agent`` finished in this invocation (since it last started)."""
        return agent.name in self.ended

    def transfer_of(self, agent: BaseAgent) -> BaseAgent | None:
        """The agent ``agent`` handed off to before it ended, if any."""
        target = self.transfers.get(agent.name)
        return None if target is None else self.root.find_agent(target)

    def was_escalated(self, agent: BaseAgent) -> bool:
        """Whether an escalation ended ``agent`` (a loop or a parallel agent) in this run."""
        return agent.name in self.escalated

    def state_of(self, agent: BaseAgent) -> Mapping[str, Any] | None:
        """The last checkpoint ``agent`` committed, or None if it has not started."""
        return self.states.get(agent.name)

    def calls_to_run(self, agent: BaseAgent) -> list[FunctionCall]:
        """The calls of ``agent``'s last model turn that have no result and are not waiting for
        the client: they run again."""
        event = self.last_calls.get(agent.name)
        if event is None:
            return []
        waiting = event.long_running_tool_ids or ()
        return [
            call
            for call in event.get_function_calls()
            if call.id and call.id not in self.answered and call.id not in waiting
        ]

    def answered_since(self, agent: BaseAgent) -> bool:
        """Whether the user answered one of ``agent``'s last calls after its last content event."""
        last = self.last_own.get(agent.name)
        event = self.last_calls.get(agent.name)
        if last is None or event is None:
            return False
        answers = self.user_answers
        return any(answers.get(c.id or "", -1) > last[0] for c in event.get_function_calls())

    def last_event(self, agent: BaseAgent) -> Event | None:
        """``agent``'s last content event in the invocation (since it last started)."""
        last = self.last_own.get(agent.name)
        return None if last is None else last[1]

    def waits_for_client(self, agent: BaseAgent) -> bool:
        """Whether ``agent``'s last model turn has long-running calls no user answered."""
        event = self.last_calls.get(agent.name)
        if event is None or not event.long_running_tool_ids:
            return False
        return any(i not in self.answered for i in event.long_running_tool_ids)


def _names(agent: BaseAgent) -> Iterator[str]:
    yield agent.name
    for child in agent.sub_agents:
        yield from _names(child)
