"""Every session service against a pure-Python model of the contract (Hypothesis stateful test).

The machine creates, reads (whole, or windowed by ``GetSessionConfig``), lists and deletes
sessions of two apps and two users, appends events whose state deltas touch the session, ``app:``,
``user:`` and ``temp:`` scopes (partial events among them), appends through stale snapshots and
snapshots of deleted sessions, and appends deltas that cannot be stored. After each step the
service must agree with :class:`ContractModel`:

* R-ST-4: ``app:`` keys are shared by the app's sessions, ``user:`` keys by the user's, ``temp:``
  keys are never stored (but reach the appending snapshot, R-ST-5);
* R-ST-5: a committed event is stored as returned, with ``temp:`` keys stripped from its delta; a
  partial event is returned untouched and changes nothing; the snapshot is updated in place;
* R-ST-6: reads merge session, ``app:`` and ``user:`` state; ``list_sessions`` returns the
  sessions without events, by last update time, then user id and id (as google-adk does);
* R-ST-7: a duplicate id raises ``SessionExistsError`` and stores nothing; deleting a missing
  session does nothing;
* R-ST-8: ``num_recent_events`` / ``after_timestamp`` windows (the state is always whole);
* R-SS-6 / ARCHITECTURE §4: the revision counts committed events; an append through an older
  snapshot raises ``StaleSessionError`` and stores nothing, as does an append through a snapshot
  of a session deleted and created again since (at any revision); events read back in commit
  order.

Trio runs on a dedicated thread (ECOSYSTEM §1: hypothesis-trio is broken): :class:`TrioThread`
hosts one ``trio.run`` per example with a root nursery, each rule runs its coroutine there with
``trio.from_thread.run``, and the service lives in a task of that nursery until teardown.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import attrs
import pytest
import trio
import trio.lowlevel
from _pytest.outcomes import Failed
from hypothesis import HealthCheck, Phase, event as label, settings, strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    multiple,
    rule,
    run_state_machine_as_test,
)

from trio_agents import (
    Event,
    EventActions,
    SerializationError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
)
from trio_agents.sessions import (
    GetSessionConfig,
    InMemorySessionService,
    Session,
    SessionService,
)
from trio_agents.testing.strategies import json_values

T = TypeVar("T")
ServiceFactory = Callable[[], AbstractAsyncContextManager[SessionService]]

APPS = ("app", "other")
USERS = ("u", "v")
IDS = ("s1", "s2", "s3")
SCOPES = ("", "app:", "user:", "temp:")


class TrioThread:
    """A Trio loop on its own thread, with a root nursery; :meth:`run` calls into it."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._closing: trio.Event | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)
        self._thread.start()
        self._ready.wait()

    async def _main(self) -> None:
        self._closing = trio.Event()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set()
            await self._closing.wait()
            nursery.cancel_scope.cancel()

    def run(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``await afn(*args)`` on the loop; return its result or raise its exception."""
        return trio.from_thread.run(afn, *args, trio_token=self._token)

    def hold(self, manager: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        """Enter ``manager()`` in a task of the root nursery and keep it entered until
        :meth:`close`; return what it yields."""
        closing, nursery = self._closing, self._nursery
        assert closing is not None and nursery is not None

        async def holder(*, task_status: trio.TaskStatus[T]) -> None:
            async with manager() as value:
                task_status.started(value)
                await closing.wait()

        async def start() -> T:
            value: T = await nursery.start(holder)
            return value

        return self.run(start)

    def close(self) -> None:
        """Leave every held context (in the loop), end the loop and join its thread."""
        if self._closing is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._closing.set, trio_token=self._token)
        self._thread.join()


# -- the model ------------------------------------------------------------------------------------


@attrs.define
class ModelSession:
    own: dict[str, Any]
    events: list[Event] = attrs.field(factory=list)
    created: int = 0
    updated: float = 0.0  # the creation time the store gave, then the last event's timestamp

    @property
    def revision(self) -> int:
        return len(self.events)


@attrs.define
class ContractModel:
    """What every store must show, from the calls alone."""

    sessions: dict[tuple[str, str, str], ModelSession] = attrs.field(factory=dict)
    app_state: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    user_state: dict[tuple[str, str], dict[str, Any]] = attrs.field(factory=dict)
    creations: int = 0

    def merged(self, key: tuple[str, str, str]) -> dict[str, Any]:
        app, user, _ = key
        return {
            **self.sessions[key].own,
            **self.app_state.get(app, {}),
            **self.user_state.get((app, user), {}),
        }

    def apply(self, key: tuple[str, str, str], delta: dict[str, Any]) -> None:
        app, user, _ = key
        for name, value in delta.items():
            if name.startswith("app:"):
                self.app_state.setdefault(app, {})[name] = value
            elif name.startswith("user:"):
                self.user_state.setdefault((app, user), {})[name] = value
            elif not name.startswith("temp:"):
                self.sessions[key].own[name] = value

    def create(self, key: tuple[str, str, str], state: dict[str, Any]) -> None:
        self.creations += 1
        self.sessions[key] = ModelSession(own={}, created=self.creations)
        self.apply(key, state)

    def window(self, key: tuple[str, str, str], config: GetSessionConfig | None) -> list[Event]:
        events = self.sessions[key].events
        if config is None:
            return list(events)
        if config.after_timestamp is not None:
            events = [e for e in events if e.timestamp >= config.after_timestamp]
        if config.num_recent_events is not None:
            events = events[max(0, len(events) - config.num_recent_events) :]
        return list(events)


def _key(session: Session) -> tuple[str, str, str]:
    return (session.app_name, session.user_id, session.id)


def _strip_temp(delta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in delta.items() if not k.startswith("temp:")}


state_keys = st.builds(str.__add__, st.sampled_from(SCOPES), st.sampled_from(["a", "b"]))
deltas = st.dictionaries(state_keys, json_values(max_leaves=3), max_size=3)
configs = st.none() | st.builds(
    GetSessionConfig,
    num_recent_events=st.none() | st.integers(0, 4),
    after_timestamp=st.none() | st.integers(0, 40).map(lambda n: n / 2),
)


class SessionServiceMachine(RuleBasedStateMachine):
    """Drives one service of :attr:`factory`'s backend; see the module docstring."""

    factory: ServiceFactory

    snapshots = Bundle("snapshots")

    def __init__(self) -> None:
        super().__init__()
        self.model = ContractModel()
        self.origins: dict[int, tuple[Session, int]] = {}  # id -> (snapshot, its incarnation)
        self.clock = 0.0
        self.trio = TrioThread()
        self.service: SessionService = self.trio.hold(type(self).factory)

    def teardown(self) -> None:
        self.trio.close()

    def call(self, afn: Callable[..., Awaitable[T]], *args: Any) -> T:
        return self.trio.run(afn, *args)

    # -- rules ----------------------------------------------------------------------------------

    @initialize(
        target=snapshots,
        _random=st.random_module(),
        first=st.lists(
            st.tuples(st.sampled_from(APPS), st.sampled_from(USERS), deltas), max_size=3
        ),
    )
    def start(self, _random: Any, first: list[tuple[str, str, dict[str, Any]]]) -> Any:
        """Seed Trio's scheduler (and ``random``) from the example; create a few sessions."""
        return multiple(*(self.create(app, user, None, state) for app, user, state in first))

    @rule(
        target=snapshots,
        app=st.sampled_from(APPS),
        user=st.sampled_from(USERS),
        session_id=st.none() | st.sampled_from(IDS),
        state=deltas,
    )
    def create(self, app: str, user: str, session_id: str | None, state: dict[str, Any]) -> Any:
        async def create() -> Session:
            return await self.service.create_session(
                app_name=app, user_id=user, state=state, session_id=session_id
            )

        if session_id is not None and (app, user, session_id) in self.model.sessions:
            with pytest.raises(SessionExistsError):
                self.call(create)
            return multiple()
        created = self.call(create)
        key = _key(created)
        assert key not in self.model.sessions
        assert session_id is None or created.id == session_id
        self.model.create(key, state)
        self.model.sessions[key].updated = created.last_update_time
        assert created.state == self.model.merged(key)
        assert (len(created.events), created.revision) == (0, 0)
        return self._seen(created)

    def _seen(self, snapshot: Session) -> Session:
        """Note which incarnation of its session ``snapshot`` was read from."""
        self.origins[id(snapshot)] = (snapshot, self.model.sessions[_key(snapshot)].created)
        return snapshot

    @rule(
        target=snapshots,
        app=st.sampled_from(APPS),
        user=st.sampled_from(USERS),
        session_id=st.sampled_from(IDS),
        config=configs,
    )
    def get_by_name(
        self, app: str, user: str, session_id: str, config: GetSessionConfig | None
    ) -> Any:
        return self._get((app, user, session_id), config)

    @rule(target=snapshots, snapshot=snapshots, config=configs)
    def get_again(self, snapshot: Session, config: GetSessionConfig | None) -> Any:
        return self._get(_key(snapshot), config)

    def _get(self, key: tuple[str, str, str], config: GetSessionConfig | None) -> Any:
        app, user, session_id = key

        async def get() -> Session | None:
            return await self.service.get_session(
                app_name=app, user_id=user, session_id=session_id, config=config
            )

        found = self.call(get)
        if key not in self.model.sessions:
            assert found is None
            return multiple()
        assert found is not None
        assert _key(found) == key
        assert found.state == self.model.merged(key)
        assert list(found.events) == self.model.window(key, config)
        assert found.revision == self.model.sessions[key].revision
        return self._seen(found)

    @rule(app=st.sampled_from(APPS), user=st.none() | st.sampled_from(USERS))
    def list_sessions(self, app: str, user: str | None) -> None:
        async def listed() -> list[Session]:
            return await self.service.list_sessions(app_name=app, user_id=user)

        found = self.call(listed)
        expected = sorted(
            (k for k in self.model.sessions if k[0] == app and user in (None, k[1])),
            key=lambda k: (self.model.sessions[k].updated, k[1], k[2]),
        )
        assert [_key(s) for s in found] == expected
        for session in found:
            assert len(session.events) == 0
            assert session.state == self.model.merged(_key(session))
            assert session.last_update_time == self.model.sessions[_key(session)].updated

    @rule(app=st.sampled_from(APPS), user=st.sampled_from(USERS), session_id=st.sampled_from(IDS))
    def delete_by_name(self, app: str, user: str, session_id: str) -> None:
        self._delete((app, user, session_id))

    @rule(snapshot=snapshots)
    def delete(self, snapshot: Session) -> None:
        self._delete(_key(snapshot))

    @rule(target=snapshots, snapshot=snapshots, state=deltas)
    def recreate(self, snapshot: Session, state: dict[str, Any]) -> Any:
        """Delete the session and create it again under the same id: the snapshots of the old
        one (at revision 0 too) are stale for the new one."""
        self._delete(_key(snapshot))
        return self.create(snapshot.app_name, snapshot.user_id, snapshot.id, state)

    def _delete(self, key: tuple[str, str, str]) -> None:
        async def delete() -> None:
            await self.service.delete_session(app_name=key[0], user_id=key[1], session_id=key[2])

        self.call(delete)
        self.model.sessions.pop(key, None)

    @rule(snapshot=snapshots, delta=deltas, partial=st.booleans(), timestamp_step=st.integers(0, 2))
    def append(
        self, snapshot: Session, delta: dict[str, Any], partial: bool, timestamp_step: int
    ) -> None:
        self.clock += timestamp_step  # equal timestamps happen; commit order must still hold
        event = Event(
            author="agent",
            invocation_id="e-1",
            timestamp=self.clock,
            partial=partial or None,
            actions=EventActions(state_delta=delta),
        )
        key = _key(snapshot)
        before = attrs.evolve(snapshot, state=dict(snapshot.state), events=list(snapshot.events))

        async def append() -> Event:
            return await self.service.append_event(snapshot, event)

        stored = self.model.sessions.get(key)
        if partial:
            label("append: partial")
            assert self.call(append) is event
            assert snapshot == before
            return
        if stored is None:
            label("append: deleted")
            with pytest.raises(SessionNotFoundError):
                self.call(append)
            assert snapshot == before
            return
        recreated = self.origins[id(snapshot)][1] != stored.created
        if recreated or snapshot.revision != stored.revision:
            label("append: recreated" if recreated else "append: stale")
            with pytest.raises(StaleSessionError) as caught:
                self.call(append)
            assert caught.value.recreated == recreated
            assert snapshot == before
            return
        label("append: committed")
        committed = self.call(append)
        assert dict(committed.actions.state_delta) == _strip_temp(delta)
        assert committed == attrs.evolve(
            event, actions=attrs.evolve(event.actions, state_delta=_strip_temp(delta))
        )
        stored.events.append(committed)
        stored.updated = committed.timestamp
        self.model.apply(key, delta)
        assert snapshot.revision == stored.revision
        assert list(snapshot.events) == [*before.events, committed]
        for name, value in delta.items():  # temp: keys too (R-ST-5)
            assert snapshot.state[name] == value

    @rule(target=snapshots, snapshot=snapshots, delta=deltas)
    def reload_and_append(self, snapshot: Session, delta: dict[str, Any]) -> Any:
        """The caller's answer to a stale snapshot: read it again, then append."""
        fresh = self._get(_key(snapshot), None)
        if isinstance(fresh, Session):
            self.append(fresh, delta, partial=False, timestamp_step=1)
        return fresh

    @rule(target=snapshots, snapshot=snapshots, first=deltas, second=deltas)
    def two_writers(self, snapshot: Session, first: dict[str, Any], second: dict[str, Any]) -> Any:
        """S-ST-4: two copies read at one revision; the second to append is stale."""
        copies = [self._get(_key(snapshot), None) for _ in range(2)]
        if not all(isinstance(c, Session) for c in copies):
            return multiple()
        self.append(copies[0], first, partial=False, timestamp_step=1)
        self.append(copies[1], second, partial=False, timestamp_step=0)
        return multiple(*copies)

    @rule(snapshot=snapshots, good=deltas)
    def append_what_cannot_be_stored(self, snapshot: Session, good: dict[str, Any]) -> None:
        """A delta with a value JSON cannot carry is refused before anything is stored."""
        event = Event(author="agent", actions=EventActions(state_delta={**good, "bad": {1, 2}}))
        before = attrs.evolve(snapshot, state=dict(snapshot.state), events=list(snapshot.events))

        async def append() -> Event:
            return await self.service.append_event(snapshot, event)

        stored = self.model.sessions.get(_key(snapshot))
        if (
            stored is not None
            and stored.revision == snapshot.revision
            and stored.created == self.origins[id(snapshot)][1]
        ):
            with pytest.raises(SerializationError, match="bad"):
                self.call(append)
        else:  # which check comes first is the backend's choice
            with pytest.raises((SerializationError, SessionNotFoundError, StaleSessionError)):
                self.call(append)
        assert snapshot == before

    @rule()
    def every_session_reads_as_the_model_says(self) -> None:
        async def read_all() -> dict[tuple[str, str, str], Session | None]:
            return {
                key: await self.service.get_session(
                    app_name=key[0], user_id=key[1], session_id=key[2]
                )
                for key in self.model.sessions
            }

        for key, found in self.call(read_all).items():
            assert found is not None, key
            assert found.state == self.model.merged(key)
            assert list(found.events) == self.model.sessions[key].events
            assert found.revision == self.model.sessions[key].revision
            assert not any(k.startswith("temp:") for k in found.state)


STATEFUL = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def test_session_services_follow_the_contract_model(service_factory: ServiceFactory) -> None:
    """R-ST-4..8, R-SS-6, ARCHITECTURE §4, on every backend (``service_factory``)."""

    class Machine(SessionServiceMachine):
        factory = staticmethod(service_factory)

    run_state_machine_as_test(Machine, settings=STATEFUL)


# -- the machinery itself --------------------------------------------------------------------------


def test_the_trio_thread_runs_coroutines_and_raises_their_errors() -> None:
    loop = TrioThread()
    try:

        async def add(a: int, b: int) -> int:
            await trio.lowlevel.checkpoint()
            return a + b

        async def fail() -> None:
            raise KeyError("from the loop")

        assert loop.run(add, 2, 3) == 5
        with pytest.raises(KeyError, match="from the loop"):
            loop.run(fail)
        assert loop.run(add, 1, 1) == 2
    finally:
        loop.close()


def test_the_machine_finds_a_service_that_accepts_stale_appends() -> None:
    """A service that silently refreshes stale snapshots (R-SS-6 broken) is caught."""

    class LastWriterWins(InMemorySessionService):
        async def append_event(self, session: Session, event: Event) -> Event:
            current = await self.get_session(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )
            if current is None or event.partial:
                return await super().append_event(session, event)
            held, session.revision = session.revision, current.revision
            try:
                return await super().append_event(session, event)
            except Exception:
                session.revision = held
                raise

    @contextlib.asynccontextmanager
    async def last_writer_wins() -> AsyncIterator[SessionService]:
        yield LastWriterWins()

    class Machine(SessionServiceMachine):
        factory = staticmethod(last_writer_wins)

    quick = settings(
        STATEFUL,
        max_examples=500,
        database=None,
        phases=[Phase.generate],
        print_blob=False,
        report_multiple_bugs=False,
    )
    with pytest.raises(Failed, match=r"DID NOT RAISE.*StaleSessionError"):
        run_state_machine_as_test(Machine, settings=quick)
