"""Agent transfer (R-XFER-1..6) and next-turn routing (R-XFER-8).

A transfer is a hand-off: the source agent finishes its turn (its after-agent callbacks run),
then the target runs in its place on the same branch, in the same invocation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

from .._errors import AgentTransferError
from .._events import Event
from ..models._base import FunctionDeclaration, LlmRequest
from ..tools._base import BaseTool, ToolContext
from ._base import BaseAgent

if TYPE_CHECKING:
    from ._llm import LlmAgent

__all__ = ["agent_to_run", "check_transfer", "route", "transfer_targets"]

TRANSFER_TOOL = "transfer_to_agent"


def _is_llm(agent: BaseAgent | None) -> TypeGuard[LlmAgent]:
    from ._llm import LlmAgent

    return isinstance(agent, LlmAgent)


def transfer_targets(agent: LlmAgent) -> list[BaseAgent]:
    """Sub-agents; the parent and peers too when the parent is an LLM agent (R-XFER-1)."""
    targets = list(agent.sub_agents)
    parent = agent.parent_agent
    if parent is None or not _is_llm(parent):
        return targets
    if not agent.disallow_transfer_to_parent:
        targets.append(parent)
    if not agent.disallow_transfer_to_peers:
        targets.extend(p for p in parent.sub_agents if p is not agent)
    return targets


class TransferToAgentTool(BaseTool):
    """The ``transfer_to_agent(agent_name)`` tool offered to agents that have targets."""

    def __init__(self, source: LlmAgent, targets: Sequence[BaseAgent]) -> None:
        super().__init__(
            name=TRANSFER_TOOL, description="Transfer the conversation to another agent."
        )
        self.source = source
        self.targets = {t.name: t for t in targets}

    def declaration(self) -> FunctionDeclaration:
        return FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters={
                "type": "object",
                "properties": {
                    "agent_name": {"type": "string", "enum": list(self.targets)},
                },
                "required": ["agent_name"],
            },
        )

    async def process_llm_request(
        self, *, tool_context: ToolContext, llm_request: LlmRequest
    ) -> None:
        await super().process_llm_request(tool_context=tool_context, llm_request=llm_request)
        llm_request.append_instructions(transfer_instructions(self.source, self.targets))

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        name = args.get("agent_name")
        target = check_transfer(self.source, name if isinstance(name, str) else str(name))
        tool_context.actions.transfer_to_agent = target.name
        return None


def check_transfer(source: LlmAgent, name: str) -> BaseAgent:
    """The agent ``source`` may hand off to, or :class:`AgentTransferError` (R-XFER-4)."""
    if name == source.name:
        raise AgentTransferError(
            f"agent {source.name!r} cannot transfer to itself", source=source.name, target=name
        )
    for target in transfer_targets(source):
        if target.name == name:
            return target
    if source.root_agent.find_agent(name) is None:
        raise AgentTransferError(
            f"Transfer target agent {name!r} not found (source {source.name!r}).",
            source=source.name,
            target=name,
        )
    raise AgentTransferError(
        f"agent {source.name!r} may not transfer to {name!r}: it is not a sub-agent, and the "
        "parent or peers are not allowed (disallow_transfer_to_parent/peers, or a non-LLM parent)",
        source=source.name,
        target=name,
    )


def transfer_instructions(source: LlmAgent, targets: dict[str, BaseAgent]) -> str:
    lines = ["You can hand the conversation to one of these agents:", ""]
    for target in targets.values():
        lines.append(f"- {target.name}: {target.description or '(no description)'}")
    lines += [
        "",
        "Answer yourself when your own description fits the request best. When another agent "
        f"fits better, call `{TRANSFER_TOOL}` with its name and say nothing else.",
    ]
    parent = source.parent_agent
    if parent is not None and parent.name in targets:
        lines.append(
            f"When neither you nor the agents above fit, transfer back to your parent "
            f"{parent.name}."
        )
    return "\n".join(lines)


# -- next-turn routing (R-XFER-8) -----------------------------------------------------------------


def agent_to_run(root: BaseAgent, events: Sequence[Event]) -> BaseAgent:
    """The agent that answers the newest user message."""
    return route(root, events)[0]


def route(root: BaseAgent, events: Sequence[Event]) -> tuple[BaseAgent, str | None]:
    """The agent that answers the newest user message, and the branch it runs on: the branch
    of the call that message answers, when that agent made it (e.g. a parallel branch), else
    None (the root's)."""
    call = _answered_call_event(events)
    if call is not None:
        author = root.find_agent(call.author)
        if author is not None:
            return author, call.branch
    return _talking_agent(root, events), None


def _talking_agent(root: BaseAgent, events: Sequence[Event]) -> BaseAgent:
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.author == "user" or (event.error_code and event.content is None):
            continue
        chosen = _candidate(root, event)
        if chosen is not None:
            return chosen
    return root


def _candidate(root: BaseAgent, event: Event) -> BaseAgent | None:
    author = root.find_agent(event.author)
    if author is None:
        return None
    target_name = event.actions.transfer_to_agent
    if target_name and _is_llm(author):
        target = root.find_agent(target_name)
        if target in transfer_targets(author) and target is not None and _transferable(target):
            return target
    if author is root or _transferable(author):
        return author
    return None


def _transferable(agent: BaseAgent) -> bool:
    """The agent and every ancestor, the root included, are LLM agents that allow going up.

    The root's own flag counts too, as in ADK's ``is_transferable_across_agent_tree``.
    """
    node: BaseAgent | None = agent
    while node is not None:
        if not _is_llm(node) or node.disallow_transfer_to_parent:
            return False
        node = node.parent_agent
    return True


def _answered_call_event(events: Sequence[Event]) -> Event | None:
    """The event holding the call the newest event (a user's function response) answers."""
    if not events:
        return None
    responses = events[-1].get_function_responses()
    if not responses or not responses[0].id:
        return None
    call_id = responses[0].id
    for index in range(len(events) - 2, -1, -1):
        event = events[index]
        if any(call.id == call_id for call in event.get_function_calls()):
            return event
    return None
