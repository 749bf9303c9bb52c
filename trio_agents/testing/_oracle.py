"""The reference semantics of random applications, checked against what a run delivered.

A run of a tree of Sequential / Parallel / Loop agents over :class:`ScriptedAgent` s and planned
LLM agents is deterministic except for the interleaving of parallel branches and for where it is
stopped. The reference walks the delivered events in order: each event must be the next event of
some agent that the rules allow to run at that point; which parallel branch moves is read off
the event. A run that ended on its own must have delivered everything the reference expects; a
stopped or failed run may stop anywhere.

Rules enforced: R-SEQ-1/2 (children in order; escalation ignored), R-PAR-1 (branch names),
R-PAR-3 (each branch keeps its order), R-PAR-6 (after a direct child's escalation nothing more
from the parallel agent), R-LOOP-1/2/3 (passes; the current sub-agent finishes, the loop and
every enclosing loop end), R-XFER-3 (a transfer's call and response by the source, then the
target on the same branch).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from .._events import Event
from ..agents._base import BaseAgent
from ..agents._llm import LlmAgent
from ..agents._loop import LoopAgent
from ..agents._parallel import ParallelAgent, child_branch
from ..agents._sequential import SequentialAgent
from ._agents import ScriptedAgent
from ._planned import FOLLOW_UP, FUZZ_TOOL, PlannedModel, Turn

__all__ = ["token_of"]  # Reference and Token: internal to Application.violations


@attrs.frozen
class Token:
    """An event reduced to what the reference predicts about it."""

    author: str
    kind: str  # emit | partial | escalate | call | response | text
    branch: str | None
    run: int = 0
    step: int = 0
    names: tuple[str, ...] = ()
    escalate: bool = False
    transfer: str | None = None

    def __str__(self) -> str:
        where = f"run {self.run} step {self.step}" if self.run else ",".join(self.names)
        extra = " escalate" if self.escalate else ""
        extra += f" transfer->{self.transfer}" if self.transfer else ""
        return f"<{self.author} {self.kind} {where}{extra} @{self.branch}>"


def token_of(event: Event) -> Token:
    """The token of a delivered event."""
    tag = (event.custom_metadata or {}).get("fuzz")
    escalate = bool(event.actions.escalate) and not event.partial
    if isinstance(tag, dict):
        return Token(
            author=event.author,
            kind=str(tag.get("kind")),
            branch=event.branch,
            run=int(tag.get("run", 0)),
            step=int(tag.get("step", 0)),
            escalate=escalate,
        )
    calls = tuple(c.name for c in event.get_function_calls())
    answers = tuple(r.name for r in event.get_function_responses())
    names: tuple[str, ...] = ()
    if event.partial:
        kind = "partial"
    elif calls:
        kind, names = "call", calls
    elif answers:
        kind, names = "response", answers
    else:
        kind = "text"
    return Token(
        author=event.author,
        kind=kind,
        branch=event.branch,
        names=names,
        escalate=escalate,
        transfer=event.actions.transfer_to_agent,
    )


class _World:
    """State the reference shares across runs: run counters and plan positions."""

    def __init__(self, root: BaseAgent, streaming: bool) -> None:
        self.streaming = streaming
        self.leaf_runs: dict[str, int] = {}
        self.turns: dict[str, int] = {}
        self.branches: dict[str, str | None] = {}
        self.agents: dict[str, BaseAgent] = {}
        self._index(root, None)

    def _index(self, agent: BaseAgent, branch: str | None) -> None:
        self.branches[agent.name] = branch
        self.agents[agent.name] = agent
        for child in agent.sub_agents:
            inner = branch
            if isinstance(agent, ParallelAgent):
                inner = child_branch(branch, agent.name, child.name)
            self._index(child, inner)

    def start(self, agent: BaseAgent, branch: str | None) -> _Run:
        if isinstance(agent, ScriptedAgent):
            return _LeafRun(self, agent, branch)
        if isinstance(agent, LlmAgent):
            return _ClusterRun(self, agent, branch)
        if isinstance(agent, SequentialAgent):
            return _SequenceRun(self, agent, branch)
        if isinstance(agent, ParallelAgent):
            return _ParallelRun(self, agent, branch)
        if isinstance(agent, LoopAgent):
            return _LoopRun(self, agent, branch)
        raise TypeError(f"the reference cannot model {agent!r}")


class _Run:
    """One run of one agent in the reference."""

    def __init__(self, world: _World, agent: BaseAgent, branch: str | None) -> None:
        self.world = world
        self.agent = agent
        self.branch = branch
        self.escalated = False

    def settle(self) -> None:
        """Move past finished sub-runs, as the real agent would without delivering anything."""

    def offer(self, token: Token) -> bool:
        """Take ``token`` if it can be the next event of this run."""
        raise NotImplementedError

    def done(self) -> bool:
        """Whether the run ended normally with everything delivered."""
        raise NotImplementedError

    def failing(self) -> list[str]:
        """Agents of this run that may be failing now (they reached a failure point)."""
        return []

    def expected(self) -> list[Token]:
        """Tokens this run could deliver next."""
        return []

    def explain(self, token: Token) -> str | None:
        """Why ``token`` cannot come from this run, when a rule says so."""
        return None


class _LeafRun(_Run):
    def __init__(self, world: _World, agent: BaseAgent, branch: str | None) -> None:
        super().__init__(world, agent, branch)
        assert isinstance(agent, ScriptedAgent)
        run = world.leaf_runs[agent.name] = world.leaf_runs.get(agent.name, 0) + 1
        self.tokens: list[Token] = []
        self.fails = False
        for index, step in enumerate(agent.script):
            if step.kind == "raise":
                self.fails = True
                break
            kinds = {"call": ["call", "response"], "sleep": []}.get(step.kind, [step.kind])
            self.tokens += [
                Token(agent.name, kind, branch, run, index, escalate=kind == "escalate")
                for kind in kinds
            ]
        self.position = 0

    def offer(self, token: Token) -> bool:
        if self.position < len(self.tokens) and self.tokens[self.position] == token:
            self.position += 1
            self.escalated |= token.escalate
            return True
        return False

    def done(self) -> bool:
        return self.position == len(self.tokens) and not self.fails

    def failing(self) -> list[str]:
        return [self.agent.name] if self.position == len(self.tokens) and self.fails else []

    def expected(self) -> list[Token]:
        return self.tokens[self.position : self.position + 1]


class _ClusterRun(_Run):
    """An LLM agent and the agents it transfers to, turn by turn (R-XFER-3)."""

    def __init__(self, world: _World, agent: BaseAgent, branch: str | None) -> None:
        super().__init__(world, agent, branch)
        self.tokens: list[Token] = []
        self.position = 0
        self.fails = False
        self.hand_off: str | None = None
        self.speaker = agent.name
        self._begin(agent)

    def _begin(self, agent: BaseAgent) -> None:
        model = getattr(agent, "model", None)
        if not isinstance(model, PlannedModel):
            raise TypeError(f"the reference cannot model LLM agent {agent.name!r}: not planned")
        index = self.world.turns[agent.name] = self.world.turns.get(agent.name, 0) + 1
        turn = model.plan[index - 1] if index <= len(model.plan) else Turn("text")
        self.speaker = agent.name
        self.tokens = self._turn_tokens(agent.name, turn)
        self.position = 0
        self.fails = turn.kind in ("fail", "tool_fail")
        self.hand_off = turn.target if turn.kind == "transfer" else None

    def _turn_tokens(self, name: str, turn: Turn) -> list[Token]:
        def token(kind: str, *names: str, **extra: object) -> Token:
            return Token(name, kind, self.branch, names=names, **extra)  # type: ignore[arg-type]

        if turn.kind == "text":
            pieces = turn.chunks - 1 if self.world.streaming else 0
            return [token("partial")] * pieces + [token("text")]
        if turn.kind == "tools":
            names = (FUZZ_TOOL,) * turn.calls
            assert FOLLOW_UP
            return [token("call", *names), token("response", *names), token("text")]
        if turn.kind == "tool_fail":
            return [token("call", FUZZ_TOOL)]
        if turn.kind == "exit_loop":
            return [token("call", "exit_loop"), token("response", "exit_loop", escalate=True)]
        if turn.kind == "transfer":
            return [
                token("call", "transfer_to_agent"),
                token("response", "transfer_to_agent", transfer=turn.target),
            ]
        return []

    def settle(self) -> None:
        if self.position == len(self.tokens) and self.hand_off is not None:
            target = self.world.agents[self.hand_off]
            self._begin(target)

    def offer(self, token: Token) -> bool:
        self.settle()
        if self.position < len(self.tokens) and self.tokens[self.position] == token:
            self.position += 1
            self.escalated |= token.escalate
            return True
        return False

    def done(self) -> bool:
        self.settle()
        return self.position == len(self.tokens) and not self.fails and self.hand_off is None

    def failing(self) -> list[str]:
        self.settle()
        return [self.speaker] if self.position == len(self.tokens) and self.fails else []

    def expected(self) -> list[Token]:
        self.settle()
        return self.tokens[self.position : self.position + 1]


class _ChainRun(_Run):
    """A run that runs its children one at a time (sequence and loop).

    ``ended`` keeps the child runs that ended since the current child last delivered: until
    then a child that ended (a parallel agent cut short by an escalation) may still deliver an
    event it had in flight, or fail (a task cancelled but not yet at a checkpoint).
    """

    def __init__(self, world: _World, agent: BaseAgent, branch: str | None) -> None:
        super().__init__(world, agent, branch)
        self.index = 0
        self.current: _Run | None = None
        self.ended: list[_Run] = []

    def _end_current(self) -> None:
        assert self.current is not None
        self.escalated |= self.current.escalated
        self.ended.append(self.current)

    def offer(self, token: Token) -> bool:
        self.settle()
        for run in self.ended:
            if run.offer(token):
                self.escalated |= run.escalated
                return True
        if self.current is None or not self.current.offer(token):
            return False
        self.ended.clear()
        self.escalated |= self.current.escalated
        return True

    def done(self) -> bool:
        self.settle()
        return self.current is None

    def failing(self) -> list[str]:
        self.settle()
        found = [name for run in self.ended for name in run.failing()]
        return found + (self.current.failing() if self.current is not None else [])

    def expected(self) -> list[Token]:
        self.settle()
        return self.current.expected() if self.current is not None else []

    def explain(self, token: Token) -> str | None:
        for run in [*self.ended, *([self.current] if self.current is not None else [])]:
            reason = run.explain(token)
            if reason:
                return reason
        return None


class _SequenceRun(_ChainRun):
    """R-SEQ-1/2: children in order, each to its end; escalation does not stop the sequence."""

    def __init__(self, world: _World, agent: BaseAgent, branch: str | None) -> None:
        super().__init__(world, agent, branch)
        if agent.sub_agents:
            self.current = world.start(agent.sub_agents[0], branch)

    def settle(self) -> None:
        children = self.agent.sub_agents
        while self.current is not None:
            self.current.settle()
            if not self.current.done():
                return
            self._end_current()
            self.index += 1
            self.current = (
                self.world.start(children[self.index], self.branch)
                if self.index < len(children)
                else None
            )


class _LoopRun(_ChainRun):
    """R-LOOP-1/2/3: passes over the children; an escalation ends the loop after the current
    child finishes, and the escalation propagates to enclosing loops."""

    PASSES_WITHOUT_EVENTS = 1000

    def __init__(self, world: _World, agent: BaseAgent, branch: str | None) -> None:
        super().__init__(world, agent, branch)
        assert isinstance(agent, LoopAgent)
        self.limit = agent.max_iterations
        self.passes = 0
        self.ended_by: str | None = None
        if agent.sub_agents and (self.limit is None or self.limit > 0):
            self.current = world.start(agent.sub_agents[0], branch)

    def settle(self) -> None:
        children = self.agent.sub_agents
        while self.current is not None:
            self.current.settle()
            if not self.current.done():
                return
            self._end_current()
            if self.current.escalated:
                self.ended_by = f"an escalation under {children[self.index].name}"
                self.current = None
                return
            self.index += 1
            if self.index == len(children):
                self.index = 0
                self.passes += 1
                if self.limit is not None and self.passes >= self.limit:
                    self.current = None
                    return
                if self.limit is None and self.passes > self.PASSES_WITHOUT_EVENTS:
                    raise RuntimeError(f"the reference loops forever in {self.agent.name}")
            self.current = self.world.start(children[self.index], self.branch)

    def explain(self, token: Token) -> str | None:
        reason = super().explain(token)
        if (
            reason is None
            and self.current is None
            and self.ended_by
            and _within(self.agent, token.author)
        ):
            return (
                f"R-LOOP-2/R-LOOP-3: {token.author} delivered after loop "
                f"{self.agent.name} ended on {self.ended_by}"
            )
        return reason


class _ParallelRun(_Run):
    """R-PAR-3: every child at once, each in its order; R-PAR-6: a direct child's escalation
    ends the parallel agent (nothing more from any branch).
    """

    def __init__(self, world: _World, agent: BaseAgent, branch: str | None) -> None:
        super().__init__(world, agent, branch)
        self.runs = [
            world.start(child, child_branch(branch, agent.name, child.name))
            for child in agent.sub_agents
        ]
        self.cut_by: _Run | None = None

    def offer(self, token: Token) -> bool:
        if self.cut_by is not None:
            return False  # R-PAR-6: nothing follows a direct child's escalation
        for run in self.runs:
            if run.offer(token):
                self.escalated |= run.escalated
                if token.escalate and token.author == run.agent.name:
                    self.cut_by = run
                return True
        return False

    def done(self) -> bool:
        return self.cut_by is not None or all(run.done() for run in self.runs)

    def failing(self) -> list[str]:
        # After a cut, the other branches are cancelled, but a task that had not reached a
        # checkpoint yet may still fail (as may the escalating one, right after its emit).
        return [name for run in self.runs for name in run.failing()]

    def expected(self) -> list[Token]:
        if self.cut_by is not None:
            return []
        return [token for run in self.runs for token in run.expected()]

    def explain(self, token: Token) -> str | None:
        if self.cut_by is not None and _within(self.agent, token.author):
            return (
                f"R-PAR-6: {token.author} delivered after {self.cut_by.agent.name}, a direct "
                f"child of {self.agent.name}, escalated"
            )
        for run in self.runs:
            reason = run.explain(token)
            if reason:
                return reason
        return None


def _within(agent: BaseAgent, name: str) -> bool:
    return agent.name == name or agent.find_sub_agent(name) is not None


class Reference:
    """The reference run of an application, fed the delivered events one by one."""

    def __init__(self, root: BaseAgent, *, streaming: bool) -> None:
        self.world = _World(root, streaming)
        self.root = self.world.start(root, None)
        self.taken = 0

    def feed(self, events: Iterable[Event]) -> list[str]:
        """Match the delivered events; the first mismatch as a one-item list, else []."""
        for event in events:
            token = token_of(event)
            if not self.root.offer(token):
                return [self._mismatch(token)]
            self.taken += 1
        return []

    def _mismatch(self, token: Token) -> str:
        expected = self.root.expected()
        reason = self.root.explain(token)
        if reason is None:
            same_but_branch = [t for t in expected if attrs.evolve(t, branch=token.branch) == token]
            if same_but_branch:
                reason = f"R-PAR-1: expected it on branch {same_but_branch[0].branch!r}"
            elif any(t.author == token.author for t in expected):
                reason = f"R-PAR-3 / per-agent order: {token.author} skipped or repeated events"
            else:
                reason = "not expected from any agent allowed to run at this point"
        shown = ", ".join(map(str, expected)) or "nothing (the run should have ended)"
        return (
            f"order: delivered event {self.taken} {token}: {reason}; the reference expected one "
            f"of: {shown}"
        )

    def done(self) -> bool:
        return self.root.done()

    def failing(self) -> list[str]:
        return self.root.failing()

    def expected(self) -> list[Token]:
        return self.root.expected()
