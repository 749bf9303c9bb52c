"""Runs in flight in other server processes on the same store: cancel them, learn how they end.

A server on its own (:class:`LocalCluster`: in memory, SQLite) sees only its own runs. Servers
sharing one PostgreSQL (:class:`PostgresCluster`) behave as one: a run is *in flight elsewhere*
while another process holds its session's lease; a cancel is sent to every process over
``LISTEN``/``NOTIFY`` and the one running the invocation cancels it; every process announces how
each of its runs ended, so a follower anywhere sends the right terminal frame.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio

from .._serde import dumps
from ..sessions import GetSessionConfig
from ._live import Frame, SessionKey, invocation_of

if TYPE_CHECKING:
    from ..sessions._postgres import PostgresSessionService
    from ._core import ServerCore

__all__ = ["CANCEL_REASON", "END_WAIT", "cluster_of"]

logger = logging.getLogger("trio_agents.server")

LISTEN_WAIT = 0.5
"""Seconds the listener's worker thread waits for notifications before checking for a cancel."""
RECONNECT_WAIT = 1.0
"""Seconds before the listener connects again after losing its connection."""
CATCH_UP_MARGIN = LISTEN_WAIT + 1.5
"""Seconds before the listener found its connection lost from which it reads the recorded
cancels once it listens again (the loss is found up to :data:`LISTEN_WAIT` late)."""
OUTBOX = 4096
"""Announcements waiting to be sent at most (more are dropped, with a warning)."""
SIGNALS_AT_ONCE = 256
"""Announcements sent in one transaction at most."""
PENDING_CANCELS = 1024
"""Cancels remembered for runs this process has not registered yet."""
MAX_MESSAGE = 7000
"""Bytes of a message at most (PostgreSQL's limit is 8000); longer error texts are cut."""
KEY_BYTES = 1024
"""Bytes of a session's key (as JSON) a message names it by at most; longer: by digest alone."""
CANCEL_REASON = "run cancelled through the API"
END_WAIT = 2.0
"""Seconds a follower waits for the announced end of a run of another process that released its
lease (a process that died announces nothing: its followers then end with ``done``)."""


class RemoteEnd:
    """The runs of the watched session that ended in other processes while the watch lasts:
    each one's terminal frame, by invocation id (a follower waits for the run it follows)."""

    def __init__(self) -> None:
        self.frames: dict[str | None, Frame] = {}
        self._arrived = trio.Event()

    def add(self, frame: Frame) -> None:
        """``frame`` ended a run of the session in another process."""
        self.frames[invocation_of(frame)] = frame
        self._arrived.set()
        self._arrived = trio.Event()

    async def wait(self, invocation_id: str | None) -> Frame:
        """The terminal frame of ``invocation_id``, once another process announced it."""
        while invocation_id not in self.frames:
            await self._arrived.wait()
        return self.frames[invocation_id]


class LocalCluster:
    """One process alone: no run is ever in flight elsewhere."""

    end_wait = 0.0
    """Seconds a follower waits for another process to announce how a run ended."""

    async def serve(
        self, core: ServerCore, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run for the server's lifespan (nothing to do alone)."""
        task_status.started()

    async def in_flight_elsewhere(self, key: SessionKey) -> bool:
        """Whether another process runs a turn of ``key`` now."""
        await trio.lowlevel.checkpoint()
        return False

    async def holder(self, key: SessionKey) -> object | None:
        """Who holds ``key``'s lease now, as far as the processes share (None: free, or alone);
        another holder is another run."""
        await trio.lowlevel.checkpoint()
        return None

    async def cancel_elsewhere(self, key: SessionKey, invocation_id: str) -> bool:
        """Ask the process running ``invocation_id`` to cancel it; False when none does."""
        await trio.lowlevel.checkpoint()
        return False

    def registered(self, core: ServerCore, key: SessionKey) -> None:
        """A run of ``key`` began here (a cancel for it may have arrived first)."""

    def ended(self, key: SessionKey, terminal: Frame) -> None:
        """A run of ``key`` ended here with ``terminal``."""

    @contextlib.contextmanager
    def watch(self, key: SessionKey) -> Iterator[RemoteEnd]:
        """Learn when a run of ``key`` in another process ends, while the block lasts."""
        yield RemoteEnd()


class PostgresCluster(LocalCluster):
    """Processes sharing a :class:`~trio_agents.sessions.PostgresSessionService`'s database."""

    end_wait = END_WAIT

    def __init__(self, service: PostgresSessionService) -> None:
        self._service = service
        self._outbox, self._outgoing = trio.open_memory_channel[str](OUTBOX)
        self._watchers: dict[SessionKey, set[RemoteEnd]] = {}
        self._pending: collections.OrderedDict[str, str] = collections.OrderedDict()
        """Cancels for runs not registered yet: invocation id by session digest."""
        self._heard: collections.OrderedDict[str, None] = collections.OrderedDict()
        """The last cancels heard (their messages): reading the recorded ones skips them."""
        self._long: dict[str, tuple[SessionKey, int]] = {}
        """The sessions messages name by digest alone (see :func:`_addressed`) that runs or
        followers here care about, by digest: the key and how many care."""

    # -- the lifespan task -------------------------------------------------------------------

    async def serve(
        self, core: ServerCore, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen for the other processes' messages and send this one's, and watch the runs'
        lock connections (see :meth:`~trio_agents.sessions.PostgresSessionService.watching`),
        until cancelled."""
        async with self._service.watching(), trio.open_nursery() as nursery:
            nursery.start_soon(self._send_all)
            await nursery.start(self._listen, core)
            task_status.started()

    async def _send_all(self) -> None:
        """Send the messages, those queued meanwhile together (one transaction for the lot)."""
        async for message in self._outgoing:
            messages = [message]
            while len(messages) < SIGNALS_AT_ONCE:
                try:
                    messages.append(self._outgoing.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            await self._signal(messages)

    async def _signal(self, messages: list[str]) -> None:
        """Send ``messages`` together; when that fails, each alone (one that cannot be sent
        does not keep the others from going)."""
        try:
            await self._service.signal(*messages)
        except Exception as exc:  # the store is down: followers fall back on the lease
            if len(messages) > 1:
                for message in messages:
                    await self._signal([message])
                return
            logger.warning("could not notify the other servers (%s)", exc)

    async def _listen(
        self, core: ServerCore, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep a connection listening (connecting again when it is lost); started once the
        first attempt to listen succeeded or failed. Once it listens again, the cancels recorded
        since it stopped (:meth:`~trio_agents.sessions.PostgresSessionService.cancels_since`)
        reach this process's runs: none is lost while it was reconnecting."""
        started = False
        lost_at: float | None = None  # when the listening stopped, while it has not resumed
        while True:
            try:
                channel = await self._service.signal_channel()
                conn = await trio.to_thread.run_sync(self._service.held_connection)
                try:
                    await trio.to_thread.run_sync(_listen_on, conn, channel)
                    if lost_at is not None:
                        await self._catch_up(core, trio.current_time() - lost_at)
                        lost_at = None
                    if not started:
                        started = True
                        task_status.started()
                    while True:
                        for payload in await trio.to_thread.run_sync(_drain, conn):
                            self._dispatch(core, payload)
                finally:
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(conn.close)
            except Exception as exc:
                logger.warning("listening to the other servers failed (%s); retrying", exc)
            if lost_at is None:
                lost_at = trio.current_time()
            if not started:
                started = True
                task_status.started()
            await trio.sleep(RECONNECT_WAIT)

    async def _catch_up(self, core: ServerCore, elapsed: float) -> None:
        """Cancel the runs here that cancels recorded in the last ``elapsed`` seconds (and a
        margin) name, those heard already aside."""
        for payload in await self._service.cancels_since(elapsed + CATCH_UP_MARGIN):
            if payload not in self._heard:
                self._dispatch(core, payload, live_only=True)

    def _dispatch(self, core: ServerCore, payload: str, *, live_only: bool = False) -> None:
        """Act on another process's message; ``live_only``: a cancel read late reaches only a
        run in flight now (not one registered later, which may reuse its invocation id)."""
        try:
            message = json.loads(payload)
            named = message.get("key")
            key: SessionKey | None = (
                tuple(named) if named else self._long.get(message["digest"], (None, 0))[0]
            )
            digest = message.get("digest") or _digest(tuple(named))
            if message["op"] == "cancel":
                if not live_only:
                    self._hear(payload)
                self._cancel_here(core, key, digest, message["invocationId"], live_only)
            elif message["op"] == "end" and key is not None:  # else no one here cares
                self._ended_there(core, key, Frame(message["kind"], message["data"]))
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("ignored a malformed message from another server (%s)", exc)

    def _hear(self, payload: str) -> None:
        self._heard[payload] = None
        self._heard.move_to_end(payload)
        while len(self._heard) > PENDING_CANCELS:
            self._heard.popitem(last=False)

    def _cancel_here(
        self,
        core: ServerCore,
        key: SessionKey | None,
        digest: str,
        invocation_id: str,
        live_only: bool = False,
    ) -> None:
        live = None if key is None else core.live.get(key)
        if live is not None and live.invocation_id == invocation_id:
            live.cancel(CANCEL_REASON)
            return
        if live_only:
            return
        self._pending[digest] = invocation_id  # it may be ours, not registered yet
        self._pending.move_to_end(digest)
        while len(self._pending) > PENDING_CANCELS:
            self._pending.popitem(last=False)

    def _ended_there(self, core: ServerCore, key: SessionKey, frame: Frame) -> None:
        if key not in core.live:
            core.remember(key, frame)
        for remote in self._watchers.get(key, ()):
            remote.add(frame)

    # -- what the routes ask -------------------------------------------------------------------

    async def in_flight_elsewhere(self, key: SessionKey) -> bool:
        app_name, user_id, session_id = key
        return await self._service.lease_held(
            app_name=app_name, user_id=user_id, session_id=session_id
        )

    async def holder(self, key: SessionKey) -> object | None:
        app_name, user_id, session_id = key
        return await self._service.lease_holder(
            app_name=app_name, user_id=user_id, session_id=session_id
        )

    async def cancel_elsewhere(self, key: SessionKey, invocation_id: str) -> bool:
        """True (and the cancel sent) when ``key``'s lease is held and its last stored event
        belongs to ``invocation_id``."""
        app_name, user_id, session_id = key
        session = await self._service.get_session(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            config=GetSessionConfig(num_recent_events=1),
        )
        if session is None or not session.events:
            return False
        if session.events[-1].invocation_id != invocation_id:
            return False
        if not await self.in_flight_elsewhere(key):
            return False
        message = {"op": "cancel", **_addressed(key), "invocationId": invocation_id}
        await self._service.signal_cancel(
            dumps(message), invocation_id=invocation_id, digest=_digest(key)
        )
        return True

    def registered(self, core: ServerCore, key: SessionKey) -> None:
        digest = self._care(key)
        live = core.live.get(key)
        wanted = self._pending.get(digest)
        if live is not None and wanted is not None and wanted == live.invocation_id:
            del self._pending[digest]
            live.cancel(CANCEL_REASON)

    def ended(self, key: SessionKey, terminal: Frame) -> None:
        self._pending.pop(self._forget(key), None)
        message = _end_message(key, terminal)
        if message is None:
            logger.warning("the end of a run is too long to announce (ids of several KB)")
            return
        try:
            self._outbox.send_nowait(message)
        except trio.WouldBlock:
            logger.warning("too many announcements waiting; the end of a run went unannounced")

    @contextlib.contextmanager
    def watch(self, key: SessionKey) -> Iterator[RemoteEnd]:
        remote = RemoteEnd()
        watchers = self._watchers.setdefault(key, set())
        watchers.add(remote)
        self._care(key)
        try:
            yield remote
        finally:
            self._forget(key)
            watchers.discard(remote)
            if not watchers:
                self._watchers.pop(key, None)

    def _care(self, key: SessionKey) -> str:
        """A run or follower here cares about ``key``: resolve its digest; the digest."""
        digest = _digest(key)
        if "key" not in _addressed(key):
            _, count = self._long.get(digest, (key, 0))
            self._long[digest] = (key, count + 1)
        return digest

    def _forget(self, key: SessionKey) -> str:
        """One that cared about ``key`` no longer does; its digest."""
        digest = _digest(key)
        if digest in self._long:
            _, count = self._long[digest]
            if count > 1:
                self._long[digest] = (key, count - 1)
            else:
                del self._long[digest]
        return digest


def _listen_on(conn: Any, channel: str) -> None:
    from psycopg import sql

    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))


def _drain(conn: Any) -> list[str]:
    """The payloads that arrive within :data:`LISTEN_WAIT` seconds."""
    return [notify.payload for notify in conn.notifies(timeout=LISTEN_WAIT)]


def _digest(key: SessionKey) -> str:
    """A session's fixed-size name in messages."""
    return hashlib.blake2b(dumps(list(key)).encode(), digest_size=16).hexdigest()


def _addressed(key: SessionKey) -> dict[str, Any]:
    """How a message names a session: its digest, and its key unless that is long (ids can be
    as long as a request allows; a message is at most :data:`MAX_MESSAGE` bytes)."""
    named: dict[str, Any] = {"digest": _digest(key)}
    key_list = list(key)
    if len(dumps(key_list).encode()) <= KEY_BYTES:
        named["key"] = key_list
    return named


def _end_message(key: SessionKey, terminal: Frame) -> str | None:
    """The announcement of ``terminal`` (its texts cut, then the calls it waits for reduced to
    their ids and names, until it fits a message); None if even that does not fit."""
    message: dict[str, Any] = {"op": "end", **_addressed(key), "kind": terminal.kind}
    for data in _shortened(terminal.data):
        text = dumps({**message, "data": data})
        if len(text.encode()) <= MAX_MESSAGE:
            return text
    return None


def _shortened(text: str) -> Iterator[str]:
    """A terminal frame's data, then shorter forms of it."""
    yield text
    data = json.loads(text)
    cut = MAX_MESSAGE // 8
    if "error" in data:
        data["error"] = str(data["error"])[:cut]
    details = data.get("errorDetails")
    if isinstance(details, dict):
        details["message"] = str(details.get("message", ""))[:cut]
    yield dumps(data)
    calls = data.get("waitingFor")
    if isinstance(calls, list):
        data["waitingFor"] = [
            {"id": c.get("id"), "name": c.get("name")} for c in calls if isinstance(c, dict)
        ]
        yield dumps(data)
        del data["waitingFor"]
        yield dumps(data)


def cluster_of(service: object) -> LocalCluster:
    """The cluster servers on ``service`` form: PostgreSQL's shared by processes, else alone."""
    from ..sessions._postgres import PostgresSessionService

    if isinstance(service, PostgresSessionService):
        return PostgresCluster(service)
    return LocalCluster()
