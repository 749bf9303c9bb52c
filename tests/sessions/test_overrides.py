"""A subclass of a built-in store that overrides ``append_event`` or ``get_session`` (to log,
count, refuse, as ADK users wrap their services) is called for every commit and read: the
Runner's shortcuts past a checkpoint (``append_event_nowait``, ``get_session_nowait``) do not
skip an override."""

from __future__ import annotations

from typing import Any

from trio_agents import BaseAgent, Event, EventActions, InvocationContext, Runner
from trio_agents.sessions import GetSessionConfig, InMemorySessionService, Session


class Emitter(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        for i in range(2):
            await ctx.emit(Event(actions=EventActions(state_delta={"i": i})))


class Watched(InMemorySessionService):
    """Notes every append and read it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.appended: list[str] = []
        self.reads = 0

    async def append_event(self, session: Session, event: Event) -> Event:
        self.appended.append(event.author)
        return await super().append_event(session, event)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        self.reads += 1
        return await super().get_session(
            app_name=app_name, user_id=user_id, session_id=session_id, config=config
        )


async def run_once(service: InMemorySessionService) -> list[Event]:
    runner = Runner(agent=Emitter(name="a"), app_name="app", session_service=service)
    session = await service.create_session(app_name="app", user_id="u", session_id="s")
    async with runner.run(user_id="u", session_id=session.id, new_message="hi") as events:
        return [e async for e in events]


async def test_the_runner_calls_the_overrides_of_a_subclass() -> None:
    service = Watched()
    events = await run_once(service)
    assert service.appended == ["user", "a", "a"]
    assert service.reads >= 1
    stored = await InMemorySessionService.get_session(
        service, app_name="app", user_id="u", session_id="s"
    )
    assert stored is not None and list(stored.events)[1:] == events


async def test_a_subclass_overriding_both_keeps_its_shortcuts() -> None:
    """Overriding a method and its shortcut together keeps the shortcut (it is the subclass's
    own); the plain store keeps its own too."""

    class Both(Watched):
        def append_event_nowait(self, session: Session, event: Event) -> Event:
            self.appended.append("nowait:" + event.author)
            return InMemorySessionService.append_event_nowait(self, session, event)

    service = Both()
    await run_once(service)
    assert service.appended == ["nowait:user", "nowait:a", "nowait:a"]
    assert InMemorySessionService.append_event_nowait is not Watched.append_event_nowait


async def test_restoring_a_history_goes_through_the_overrides() -> None:
    service = Watched()
    events: list[Any] = [Event(author="x", timestamp=1.0), Event(author="y", timestamp=2.0)]
    created = await service._create_with_history(
        app_name="app", user_id="u", state=None, session_id="r", events=events
    )
    assert service.appended == ["x", "y"]
    assert created.revision == 2
