"""``without_cancelled``: errors that race with a cancellation are never hidden in a group."""

from __future__ import annotations

import pytest
import trio

from tests.agents.helpers import Say
from trio_agents import InMemoryRunner, ParallelAgent
from trio_agents._util import without_cancelled
from trio_agents.plugins import BasePlugin


def _cancelled() -> trio.Cancelled:
    return trio.Cancelled._create()  # type: ignore[attr-defined]


def test_one_real_failure_stands_for_the_group() -> None:
    error = ValueError("x")
    group = BaseExceptionGroup("g", [_cancelled(), BaseExceptionGroup("inner", [error])])
    assert without_cancelled(group) is error


def test_several_failures_become_one_flat_exception_group() -> None:
    a, b = ValueError("a"), KeyError("b")
    group = BaseExceptionGroup("g", [a, _cancelled(), BaseExceptionGroup("inner", [b])])
    result = without_cancelled(group)
    assert isinstance(result, ExceptionGroup)
    assert list(result.exceptions) == [a, b]


def test_a_base_exception_keeps_a_base_group() -> None:
    stop = KeyboardInterrupt()
    result = without_cancelled(BaseExceptionGroup("g", [ValueError(), stop]))
    assert not isinstance(result, ExceptionGroup)
    assert stop in result.exceptions  # type: ignore[attr-defined]


def test_only_cancellations_return_the_group_itself() -> None:
    group = BaseExceptionGroup("g", [_cancelled(), _cancelled()])
    assert without_cancelled(group) is group


class Counter(BasePlugin):
    def __init__(self) -> None:
        super().__init__(name="counter")
        self.after_runs = 0

    async def after_run_callback(self, *, invocation_context: object) -> None:
        self.after_runs += 1


async def test_branch_errors_racing_the_consumer_leaving_surface_and_skip_after_run() -> None:
    """R-PLG-8 and ARCHITECTURE §2: the consumer leaves while two branches fail at once.

    The failures must surface (as an ``ExceptionGroup``, not hidden behind the cancellation),
    each gets its error event, and ``after_run`` does not run after an error.
    """
    for _ in range(10):  # Trio's scheduler decides whether the race happens; try it often
        await _leave_while_two_branches_fail()


async def _leave_while_two_branches_fail() -> None:
    counter = Counter()
    fan_out = ParallelAgent(
        name="fan",
        sub_agents=[
            Say(name="talker", words=("one",)),
            Say(name="bad1", words=(), error=ValueError("bad1")),
            Say(name="bad2", words=(), error=ValueError("bad2")),
        ],
    )
    runner = InMemoryRunner(fan_out, plugins=[counter])
    session = await runner.session_service.create_session(app_name=runner.app_name, user_id="u")
    expected = pytest.RaisesGroup(
        pytest.RaisesExc(ValueError, match="^bad1$"), pytest.RaisesExc(ValueError, match="^bad2$")
    )
    with expected:
        async with runner.run(user_id="u", session_id=session.id, new_message="go") as events:
            async for _ in events:
                break
    stored = await runner.session_service.get_session(
        app_name=runner.app_name, user_id="u", session_id=session.id
    )
    assert stored is not None
    assert sorted(e.author for e in stored.events if e.error_code == "ValueError") == [
        "bad1",
        "bad2",
    ]
    assert counter.after_runs == 0
