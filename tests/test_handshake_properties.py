"""Property tests of the Runner handshake (ARCHITECTURE §2, rules 1-7).

Random trees of Sequential / Parallel / Loop agents over scripted leaves run under many Trio
scheduler interleavings (``st.random_module()`` reseeds the scheduler's randomness), and are
stopped in every way a run can stop: completion, the consumer leaving after k events, an
external ``cancel()``, an outer timeout, and a branch raising.
"""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import given, note, strategies as st

from tests.apps import InjectedError, Probe, agent_trees, describe_tree
from trio_agents import Event, Runner
from trio_agents.plugins import BasePlugin
from trio_agents.sessions import InMemorySessionService

OUTCOMES = ("complete", "leave", "cancel", "timeout")


class AfterRunCounter(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="after_run_counter")
        self.after_runs = 0

    async def after_run_callback(self, *, invocation_context: Any) -> None:
        self.after_runs += 1


async def _consume(runner: Runner, session_id: str, probe: Probe, outcome: str, k: int) -> bool:
    """Run once, stopping as ``outcome`` says; return True when the run raised InjectedError."""
    failed = False
    with trio.CancelScope() as outer:
        try:
            async with runner.run(user_id="u", session_id=session_id, new_message="go") as events:
                async for event in events:
                    probe.delivered.append(event)
                    if len(probe.delivered) >= k:
                        if outcome == "leave":
                            break
                        if outcome == "cancel":
                            events.cancel("test cancels")
                        if outcome == "timeout":
                            outer.cancel("test deadline")
        except* InjectedError:
            failed = True
    return failed


def _check_history(stored: list[Event], delivered: list[Event]) -> None:
    committed = [e for e in delivered if not e.partial]
    assert stored[0].author == "user"
    # Rule 2: the consumer's order is the commit order; rule 3: partial events never stored.
    assert stored[1 : 1 + len(committed)] == committed
    assert not any(e.partial for e in stored)
    # Whatever follows the delivered events is the aftermath: closing responses, error events.
    for extra in stored[1 + len(committed) :]:
        assert extra.error_code or extra.get_function_responses()
    # Rule 7: no unpaired function call.
    calls = {c.id for e in stored for c in e.get_function_calls()}
    answers = {r.id for e in stored for r in e.get_function_responses()}
    assert calls <= answers


def _check_branch_order(delivered: list[Event]) -> None:
    last: dict[str, int] = {}
    for event in delivered:
        seq = (event.custom_metadata or {}).get("seq")
        if seq is None:
            continue
        assert seq > last.get(event.author, 0), f"{event.author} out of order"
        last[event.author] = seq


def _fold(stored: list[Event]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for event in stored:
        state.update(event.actions.state_delta)
    return state


@given(
    data=st.data(),
    _seed=st.random_module(),
    outcome=st.sampled_from(OUTCOMES),
    k=st.integers(min_value=0, max_value=12),
)
async def test_handshake_invariants_hold_for_random_apps(
    data: st.DataObject, _seed: Any, outcome: str, k: int
) -> None:
    probe = Probe()
    root = data.draw(agent_trees(probe))
    note(describe_tree(root))
    counter = AfterRunCounter()
    runner = Runner(
        agent=root, app_name="app", session_service=InMemorySessionService(), plugins=[counter]
    )
    session = await runner.session_service.create_session(app_name="app", user_id="u")

    failed = await _consume(runner, session.id, probe, outcome, k)

    # Rule 5: no task of the run is alive once the block has been left.
    assert probe.running == 0
    # Rule 1: every emit returned only after commit, state applied and consumer receipt.
    assert probe.violations == []
    reread = await runner.session_service.get_session(
        app_name="app", user_id="u", session_id=session.id
    )
    assert reread is not None
    stored = list(reread.events)
    _check_history(stored, probe.delivered)
    if outcome in ("complete", "cancel"):
        # The consumer read to the end: it received every stored event of the invocation, the
        # aftermath (closing responses, error events) included (§2 rule 6).
        assert stored[1:] == [e for e in probe.delivered if not e.partial]
    _check_branch_order(probe.delivered)
    # State is the fold of the stored deltas; partial deltas never applied.
    assert reread.state == _fold(stored)
    assert not any(key.startswith("p_") for key in reread.state)
    # After-run work happens exactly once, except after an error (R-PLG-8).
    assert counter.after_runs == (0 if failed else 1)
    if failed:
        assert any(e.error_code == "InjectedError" for e in stored)
