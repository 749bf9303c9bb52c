"""Starting runs over HTTP, streaming their frames, cancelling and following them.

A run lives in a nursery: the request's own (``onDisconnect: "cancel"``, the default) or the
server's lifespan nursery (``"detach"``, bounded by ``max_detached_runs``). Three tasks take part
in a request that runs an agent:

* the *driver* iterates the Runner's stream and delivers a :class:`Frame` per event;
* the *pump* (the request task) writes the frames to the client as they arrive;
* the *watcher* waits for ``http.disconnect`` and applies the disconnect policy.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from .._content import Content
from .._errors import (
    ConfigurationError,
    ResumeError,
    SerializationError,
    SessionBusyError,
    SessionNotFoundError,
    StoreUnavailableError,
)
from .._events import Event
from .._runner import RunConfig, Runner, StreamingMode
from ..sessions import GetSessionConfig
from ._cluster import CANCEL_REASON, RemoteEnd
from ._core import ServerCore
from ._http import (
    BodyLimits,
    Fields,
    HTTPError,
    busy,
    error_response,
    json_response,
    read_json,
    unavailable,
)
from ._live import (
    MAX_BATCH,
    Frame,
    Gathering,
    LiveRun,
    SessionKey,
    event_frame,
    invocation_of,
    terminal_frame,
)

__all__ = [
    "MAX_BATCH",
    "OUTCOME_HEADER",
    "SSE_HEADERS",
    "follow",
    "parse_run",
    "pump",
    "start_run",
]

logger = logging.getLogger("trio_agents.server")

SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}
OUTCOME_HEADER = "Run-Outcome"
"""The header of a ``/run`` response saying how the run ended: done, cancelled or error."""

Sink = Callable[[list[Frame]], Awaitable[None]]
"""Takes the frames ready to go to a client, in order (one or more)."""
FrameSend = Callable[[Frame], Awaitable[None]]


@attrs.frozen
class RunPlan:
    """A validated ``/run`` or ``/run_sse`` request body."""

    app_name: str
    user_id: str
    session_id: str
    message: Content | None
    """None only when resuming (``invocation_id`` set)."""
    invocation_id: str | None
    """The invocation to continue (ADK's ``invocationId``), or None for a new one."""
    state_delta: dict[str, Any] | None
    custom_metadata: dict[str, Any] | None
    streaming: bool
    detach: bool

    @property
    def key(self) -> SessionKey:
        return (self.app_name, self.user_id, self.session_id)

    def resumes(self, runner: Runner) -> str | None:
        """The invocation ``runner`` is asked to resume.

        As ADK's server does, an app that is not resumable ignores ``invocationId`` when a
        message comes with it (function responses find the invocation of the calls they
        answer); without a message, the runner refuses the request.
        """
        if self.invocation_id is None or self.message is None or _resumable(runner):
            return self.invocation_id
        logger.info(
            "app %s is not resumable: invocationId %r ignored", self.app_name, self.invocation_id
        )
        return None

    def run_config(self, max_llm_calls: int | None) -> RunConfig:
        mode = StreamingMode.SSE if self.streaming else StreamingMode.NONE
        config = RunConfig(streaming_mode=mode, custom_metadata=self.custom_metadata)
        if max_llm_calls is None:
            return config
        return attrs.evolve(config, max_llm_calls=max_llm_calls)


def _resumable(runner: Runner) -> bool:
    return runner.resumable


def parse_run(data: Any, *, default_app: str | None, sse: bool) -> RunPlan:
    """Validate a run request body (ADK's ``RunAgentRequest`` plus ``onDisconnect``)."""
    fields = Fields(data)
    app_name = fields.identifier("appName") or default_app
    if not app_name:
        fields.required("appName")  # names the key that was meant for it, if there is one
        raise HTTPError(422, "appName: field required")
    user_id = str(fields.identifier("userId", required=True))
    session_id = str(fields.identifier("sessionId", required=True))
    invocation_id = fields.identifier("invocationId")
    message = fields.record("newMessage", Content, required=invocation_id is None)
    fields.text("functionCallEventId")  # ADK's UI sends it; the call ids in newMessage suffice
    plan = RunPlan(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        message=message,
        invocation_id=invocation_id,
        state_delta=fields.mapping("stateDelta"),
        custom_metadata=fields.mapping("customMetadata"),
        streaming=fields.flag("streaming") and sse,
        detach=fields.choice("onDisconnect", ("cancel", "detach"), "cancel") == "detach",
    )
    fields.check_unknown()
    return plan


# -- routes ----------------------------------------------------------------------------------------


class RunRoutes:
    """``/run``, ``/run_sse``, the cancel route and ``GET …/events``."""

    def __init__(
        self,
        core: ServerCore,
        *,
        body: BodyLimits,
        default_app: str | None,
        max_llm_calls: int | None,
        ping_interval: float,
    ) -> None:
        self.core = core
        self.body = body
        self.default_app = default_app
        self.max_llm_calls = max_llm_calls
        self.ping_interval = ping_interval

    async def _plan(self, request: Request, *, sse: bool) -> RunPlan:
        data = await read_json(request, self.body)
        plan = parse_run(data, default_app=self.default_app, sse=sse)
        self.core.runner(plan.app_name)
        return plan

    async def run_json(self, request: Request) -> Response:
        return RunResponse(self, await self._plan(request, sse=False), sse=False)

    async def run_sse(self, request: Request) -> Response:
        return RunResponse(self, await self._plan(request, sse=True), sse=True)

    async def cancel_run(self, request: Request) -> Response:
        key = session_key(self.core, request)
        invocation_id = request.path_params["invocation_id"]
        live = self.core.live.get(key)
        if live is not None and live.invocation_id == invocation_id and live.terminal is None:
            live.cancel(CANCEL_REASON)
        elif live is not None or not await self.core.cluster.cancel_elsewhere(key, invocation_id):
            raise HTTPError(
                404, f"no run with invocation id {invocation_id} is in flight on session {key[2]}"
            )
        return json_response({"invocationId": invocation_id, "status": "cancelling"}, 202)

    async def follow_events(self, request: Request) -> Response:
        key = session_key(self.core, request)
        after = _after(request)
        app_name, user_id, session_id = key
        found = await self.core.session_service.get_session(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            config=GetSessionConfig(num_recent_events=0),
        )
        if found is None:
            raise HTTPError(404, "Session not found")
        return FollowResponse(self.core, key, after, ping_interval=self.ping_interval)


def session_key(core: ServerCore, request: Request) -> SessionKey:
    params = request.path_params
    core.runner(params["app_name"])
    return (params["app_name"], params["user_id"], params["session_id"])


REMOTE_POLL = 0.1
"""Seconds between reads of the store while following a run of another process."""

_MAX_SEQ_DIGITS = 18
"""Event sequence numbers fit in 18 digits (a signed 64-bit integer has 19)."""


def _after(request: Request) -> int:
    for name, raw in (
        ("after", request.query_params.get("after")),
        ("Last-Event-ID", request.headers.get("last-event-id")),
    ):
        if raw is None:
            continue
        raw = raw.strip()
        if not (raw.isascii() and raw.isdigit() and len(raw) <= _MAX_SEQ_DIGITS):
            raise HTTPError(
                422,
                f"{name}: expected a non-negative integer of at most "
                f"{_MAX_SEQ_DIGITS} digits, got {raw!r:.60}",
            )
        return int(raw)
    return 0


# -- starting and driving a run ------------------------------------------------------------------


async def start_run(
    routes: RunRoutes, plan: RunPlan, primary: trio.MemorySendChannel[Frame], nursery: trio.Nursery
) -> LiveRun:
    """Start ``plan`` in ``nursery`` (or the lifespan nursery when detached); return once begun.

    Raises:
        HTTPError: 404 (no such session), 409 (a run in flight), 422 (a bad message), 503 (no
            room for another detached run). Nothing is stored in those cases.
    """
    core = routes.core
    runner = core.runner(plan.app_name)
    live = LiveRun(plan.key, primary)
    live.paths = core.node_paths(plan.app_name)
    if core.traces is not None:
        live.observe = core.traces.observe
    release = _reserve_detached(core) if plan.detach else _nothing
    owner = core.nursery if plan.detach else nursery
    assert owner is not None
    drive = functools.partial(_drive, runner, plan, live, core, release, routes.max_llm_calls)
    try:
        await owner.start(drive)
    except SessionNotFoundError as exc:
        raise HTTPError(404, str(exc)) from exc
    except SessionBusyError as exc:
        raise busy(exc) from exc
    except StoreUnavailableError as exc:
        raise unavailable(str(exc)) from exc
    except ResumeError as exc:
        raise resume_refused(exc) from exc
    except ConfigurationError as exc:
        raise HTTPError(422, f"newMessage: {exc}") from exc
    except SerializationError as exc:  # the path names the message's part or the delta's key
        raise HTTPError(422, str(exc)) from exc
    finally:
        if live.stream is None:
            release()
            primary.close()
    return live


def _nothing() -> None:
    pass


def _reserve_detached(core: ServerCore) -> Callable[[], None]:
    """Take a detached-run slot; the returned function gives it back (once)."""
    if core.nursery is None:
        raise unavailable("detached runs need the server's lifespan (it is not running)")
    if core.detached_runs >= core.max_detached_runs:
        raise unavailable(
            f"too many detached runs in flight (the limit is {core.max_detached_runs}); "
            "retry later or run attached"
        )
    core.detached_runs += 1
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            released = True
            core.detached_runs -= 1

    return release


async def _drive(
    runner: Runner,
    plan: RunPlan,
    live: LiveRun,
    core: ServerCore,
    release: Callable[[], None],
    max_llm_calls: int | None,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``plan`` and deliver its frames; always end with a terminal frame once begun."""
    terminal: Frame | None = None
    try:
        terminal = await _run(runner, plan, live, core, max_llm_calls, task_status)
        await live.conclude(terminal)
    finally:
        release()
        if live.stream is not None:
            live.end(terminal or terminal_frame("cancelled", live.invocation_id))
            core.unregister(live)


async def _run(
    runner: Runner,
    plan: RunPlan,
    live: LiveRun,
    core: ServerCore,
    max_llm_calls: int | None,
    task_status: trio.TaskStatus[None],
) -> Frame:
    try:
        async with runner.run(
            user_id=plan.user_id,
            session_id=plan.session_id,
            state_delta=plan.state_delta,
            run_config=plan.run_config(max_llm_calls),
            new_message=plan.message,
            invocation_id=plan.resumes(runner),
        ) as stream:
            live.begin(stream)
            core.register(live)
            task_status.started()
            async for event in stream:
                await live.deliver(live.frame_of(event))
            cancelled = stream.cancelled  # leaving the block cancels whatever is left anyway
    except Exception as exc:
        if live.stream is None:
            raise  # the run never began: the request answers with an HTTP error
        logger.info("run %s failed: %r", live.invocation_id, exc)
        return terminal_frame("error", live.invocation_id, exc, resumable=_resumable(runner))
    if cancelled:
        return terminal_frame("cancelled", stream.invocation_id, resumable=_resumable(runner))
    waiting = stream.waiting_for if stream.paused else ()
    return terminal_frame("done", stream.invocation_id, waiting_for=waiting)


def resume_refused(exc: ResumeError) -> HTTPError:
    """The 422 of a resume request naming no open invocation or call: ``detail`` says which
    (the field at fault first), ``invocationId`` and ``callId`` name them."""
    field = "invocationId" if exc.call_id is None else "newMessage"
    names = {"invocationId": exc.invocation_id, "callId": exc.call_id}
    return HTTPError(422, f"{field}: {exc}", extra={k: v for k, v in names.items() if v})


# -- writing frames to the client ----------------------------------------------------------------


async def pump(
    frames: trio.MemoryReceiveChannel[Frame],
    receive: Receive,
    sink: Sink,
    *,
    on_disconnect: Callable[[], None],
    ping: Callable[[], Awaitable[None]] | None = None,
    ping_interval: float = math.inf,
    gathering: Gathering | None = None,
    nursery: trio.Nursery | None = None,
) -> bool:
    """Hand every frame to ``sink`` until the channel ends or a terminal frame is written (nothing
    follows one); False when the client left first.

    ``on_disconnect`` runs as soon as ``http.disconnect`` arrives before that; the frames channel
    is closed then, so a driver still sending learns that its client is gone. While a batch is
    gathered, ``gathering`` shows it, so the run can add its frames there without waiting; a
    run given a ``gathering`` sends a frame through the channel only when it cannot add it
    there. The task waiting for the disconnection runs in ``nursery`` (the caller's, if it has
    one: that saves opening another) and is stopped before ``pump`` returns.
    """
    if nursery is None:
        async with trio.open_nursery() as own:
            return await pump(
                frames,
                receive,
                sink,
                on_disconnect=on_disconnect,
                ping=ping,
                ping_interval=ping_interval,
                gathering=gathering,
                nursery=own,
            )
    gone = False
    copying, watching = trio.CancelScope(), trio.CancelScope()

    async def watch() -> None:
        nonlocal gone
        with watching:  # stopped from outside: nothing is raised out of this task
            while (await receive())["type"] != "http.disconnect":
                pass
            if watching.cancel_called:  # the stream ended first (and told the client so)
                return
            gone = True
            on_disconnect()
            copying.cancel(reason="the client disconnected")

    nursery.start_soon(watch)
    try:
        with copying, frames:
            await _copy(frames, sink, ping, ping_interval, gathering)
    finally:
        watching.cancel(reason="the stream ended")
    return not gone


async def _copy(
    frames: trio.MemoryReceiveChannel[Frame],
    sink: Sink,
    ping: Callable[[], Awaitable[None]] | None,
    ping_interval: float,
    gathering: Gathering | None,
) -> None:
    fed = gathering is not None  # a run adds its frames to the batch: the channel stays quiet
    gathering = gathering or Gathering()
    while True:
        try:
            batch = await _next_frame(frames, ping_interval if ping else math.inf)
        except trio.EndOfChannel:
            return
        if not batch:
            assert ping is not None
            await ping()
            continue
        gathering.batch = batch
        try:
            ended = await _gather(frames, batch, poll=not fed)
        finally:
            gathering.batch = None
        await sink(batch)
        if ended or batch[-1].terminal:  # nothing follows a terminal frame
            return


async def _next_frame(
    frames: trio.MemoryReceiveChannel[Frame], ping_interval: float
) -> list[Frame]:
    """``[the next frame]``, or ``[]`` when none came within ``ping_interval`` (time for a ping).

    Raises:
        trio.EndOfChannel: the channel ended.
    """
    try:
        return [frames.receive_nowait()]  # a frame is ready: no timer needed
    except trio.WouldBlock:
        pass
    with trio.move_on_after(ping_interval):
        return [await frames.receive()]
    return []


GATHER_ROUNDS = 6
"""Scheduler rounds without a new frame after which the frames gathered so far are written."""


async def _gather(
    frames: trio.MemoryReceiveChannel[Frame], batch: list[Frame], *, poll: bool
) -> bool:
    """Add to ``batch`` the frames the run produces while the scheduler goes round (until
    :data:`GATHER_ROUNDS` rounds bring none, or the batch is full); True if the channel ended.

    With ``poll`` false, the run adds its frames to ``batch`` itself and sends none through the
    channel while a batch is gathered (it does when the batch is full, which ends the gathering),
    so the channel is not read each round: an end of the channel is seen once the batch is
    written.

    Each write to the client costs the HTTP stack about as much as producing an event costs the
    run, so frames that follow each other closely go out together: a run of 20 events is a few
    writes, not 20. Nothing waits on a clock: a frame is held back only while its run is busy
    producing the next one.
    """
    idle = 0
    seen = len(batch)
    while len(batch) < MAX_BATCH and not batch[-1].terminal:
        if poll and _take_ready(frames, batch):
            return True
        idle = 0 if len(batch) > seen else idle + 1  # the run may have added frames itself
        seen = len(batch)
        if idle > GATHER_ROUNDS:
            break
        await trio.lowlevel.checkpoint()
    return False


def _take_ready(frames: trio.MemoryReceiveChannel[Frame], batch: list[Frame]) -> bool:
    """Add to ``batch`` the frames that are ready without waiting; True if the channel ended."""
    while len(batch) < MAX_BATCH:
        try:
            batch.append(frames.receive_nowait())
        except trio.WouldBlock:
            return False
        except trio.EndOfChannel:
            return True
    return False


class _SseWriter:
    """Writes frames as SSE; the terminal frame ends the response (with the frames before it:
    one write)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._ended = False

    async def start(self) -> None:
        await self._send({"type": "http.response.start", "status": 200, "headers": _SSE_HEAD})

    async def write(self, frames: list[Frame]) -> None:
        data = frames[0].encode() if len(frames) == 1 else b"".join(f.encode() for f in frames)
        self._ended = frames[-1].terminal
        await self._send({"type": "http.response.body", "body": data, "more_body": not self._ended})

    async def ping(self) -> None:
        await self._send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})

    async def finish(self) -> None:
        """End the response (the stream ended without a terminal frame)."""
        if not self._ended:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})


_SSE_HEAD = [(k.lower().encode(), v.encode()) for k, v in SSE_HEADERS.items()]


class _JsonCollector:
    """Collects a run's frames for ``/run``: the events as one JSON array at the end."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.terminal: Frame | None = None

    async def write(self, frames: list[Frame]) -> None:
        for frame in frames:
            if frame.terminal:
                self.terminal = frame
            elif not frame.partial:
                self.events.append(frame.data)

    def response(self) -> Response:
        terminal = self.terminal
        assert terminal is not None
        headers = {OUTCOME_HEADER: terminal.kind}
        if terminal.kind == "error":
            data = json.loads(terminal.data)
            body = {"detail": data["error"], **data}
            body["events"] = [json.loads(event) for event in self.events]  # the error event too
            return json_response(body, 500, headers=headers)
        text = "[" + ",".join(self.events) + "]"
        return Response(text.encode(), media_type="application/json", headers=headers)


class RunResponse(Response):
    """Starts the run when sent, then streams it (SSE) or answers once it ended (JSON)."""

    def __init__(self, routes: RunRoutes, plan: RunPlan, *, sse: bool) -> None:
        super().__init__()
        self._routes = routes
        self._plan = plan
        self._sse = sse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        primary, frames = trio.open_memory_channel[Frame](0)
        async with trio.open_nursery() as nursery:
            try:
                live = await start_run(self._routes, self._plan, primary, nursery)
            except HTTPError as exc:
                frames.close()
                await error_response(exc)(scope, receive, send)
                return
            on_disconnect = functools.partial(_client_left, live, detach=self._plan.detach)
            if self._sse:
                writer = _SseWriter(send)
                await writer.start()
                interval = self._routes.ping_interval
                if await pump(frames, receive, writer.write, on_disconnect=on_disconnect,
                              ping=writer.ping, ping_interval=interval,
                              gathering=live.gathering, nursery=nursery):  # fmt: skip
                    await writer.finish()
            else:
                collector = _JsonCollector()
                if await pump(frames, receive, collector.write, on_disconnect=on_disconnect,
                              gathering=live.gathering, nursery=nursery):  # fmt: skip
                    await collector.response()(scope, receive, send)


def _client_left(live: LiveRun, *, detach: bool) -> None:
    live.primary_gone.set()
    if not detach:
        live.cancel("the client disconnected")


# -- following a session ---------------------------------------------------------------------------


class FollowResponse(Response):
    """SSE of a session's committed events after a sequence number, then its run in flight."""

    def __init__(
        self, core: ServerCore, key: SessionKey, after: int, *, ping_interval: float
    ) -> None:
        super().__init__()
        self._core = core
        self._key = key
        self._after = after
        self._ping_interval = ping_interval

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        out, frames = trio.open_memory_channel[Frame](0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, self._core, self._key, self._after, out)
            writer = _SseWriter(send)
            await writer.start()
            if await pump(
                frames,
                receive,
                writer.write,
                on_disconnect=nursery.cancel_scope.cancel,
                ping=writer.ping,
                ping_interval=self._ping_interval,
                nursery=nursery,
            ):
                await writer.finish()


async def follow(
    core: ServerCore, key: SessionKey, after: int, out: trio.MemorySendChannel[Frame]
) -> None:
    """Send the stored events after ``after``, then the run in flight up to its terminal frame.

    With no run in flight, the terminal frame is the one the session's last run ended with (as
    far as this server remembers), else ``done``.
    """
    with out:
        try:
            await _follow(core, key, after, out.send)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return


async def _follow(core: ServerCore, key: SessionKey, after: int, send: FrameSend) -> None:
    live = core.live.get(key)
    if live is None:
        with core.cluster.watch(key) as remote:  # watching first: no end goes unnoticed
            if await core.cluster.in_flight_elsewhere(key):
                await _follow_elsewhere(core, key, after, remote, send)
                return
            await _follow_ended(core, key, after, remote, send)
            return
    index = live.count
    last, _ = await _replay(core, key, after, send)
    while True:
        start, frames = live.frames_since(index)
        if start > index:  # fell behind the log: the store has every committed event
            last, _ = await _replay(core, key, last, send)
        index = start
        for frame in frames:
            index += 1
            if frame.seq is not None and (
                frame.seq < last or (frame.seq == last and not frame.partial)
            ):
                continue
            await send(frame)
            if not frame.partial and frame.seq is not None:
                last = frame.seq
        if index < live.count:
            continue
        if live.terminal is not None:
            await send(live.terminal)
            return
        await live.wait_changed()


async def _follow_ended(
    core: ServerCore, key: SessionKey, after: int, remote: RemoteEnd, send: FrameSend
) -> None:
    """Replay a session with no run in flight; end as its last run did (``done`` if unknown).

    A run of another process that ended a moment ago may not have announced its end yet: with
    its outcome unknown here, the follower waits for the announcement (at most ``end_wait``).
    """
    _, newest = await _replay(core, key, after, send)
    invocation_id = None if newest is None else newest.invocation_id
    wait = core.cluster.end_wait
    recent = newest is not None and time.time() - newest.timestamp < wait
    if recent and not _ends(core.outcomes.get(key), invocation_id):
        with trio.move_on_after(wait):
            await remote.wait(invocation_id)
    await send(_ending(core, key, remote, invocation_id))


def _ending(
    core: ServerCore, key: SessionKey, remote: RemoteEnd, invocation_id: str | None
) -> Frame:
    """The terminal frame of ``invocation_id`` as announced or remembered; ``done`` if unknown
    (a process that died announced nothing: the session's last known outcome is an older run's)."""
    announced = remote.frames.get(invocation_id)
    if announced is not None:
        return announced
    known = core.outcomes.get(key)
    if known is not None and _ends(known, invocation_id):
        return known
    return terminal_frame("done", invocation_id)


def _ends(frame: Frame | None, invocation_id: str | None) -> bool:
    """Whether ``frame`` is the terminal frame of ``invocation_id``."""
    return frame is not None and invocation_of(frame) == invocation_id


@attrs.define
class _Followed:
    """Where a follower of a run of another process stands: the stored events it examined, the
    seq of the last one sent (or the client's ``after``), the run's invocation id (None until
    one of its events is stored); ``confirmed`` once an event of it was stored meanwhile, ``over``
    once an event of another invocation was."""

    seen: int
    last: int
    invocation_id: str | None
    holder: object | None = None
    """Who held the lease when the follower came."""
    confirmed: bool = False
    over: bool = False
    freed: bool = False
    """The lease was seen free since: a run of another invocation is a later turn."""


async def _follow_elsewhere(
    core: ServerCore, key: SessionKey, after: int, remote: RemoteEnd, send: FrameSend
) -> None:
    """Follow a run another process holds the lease for: its events as they are stored, then
    the terminal frame it announces (committed events only: partial chunks are not stored).

    The run followed is the invocation of the newest stored event, or the next one stored when
    that invocation is known to have ended (the run in flight has stored nothing yet). It is
    over at its announced end, when the lease is free, or at a stored event of another
    invocation (a next turn began at once, maybe in another process): the follower then ends
    with the followed run's terminal frame, before any event of the next turn. A follower that
    came before the run in flight stored anything, never heard how the previous turn ended, and
    sees the lease free before it reads the run's first event, ends with the previous turn's end:
    to it, that run and the next turn of a run that died look the same.
    """
    events = await _stored(core, key)
    last, newest = await _send_stored(core, key, events, after, send)
    newest_id = None if newest is None else newest.invocation_id
    in_flight = None if _ends(core.outcomes.get(key), newest_id) else newest_id
    holder = await core.cluster.holder(key)
    followed = _Followed(len(events), last, in_flight, holder)
    while followed.invocation_id not in remote.frames:
        with trio.move_on_after(REMOTE_POLL):
            await remote.wait(followed.invocation_id)
        await _advance(core, key, remote, followed, send)
        if followed.over:
            break
        if await core.cluster.holder(key) is None:
            followed.freed = True
            break
    await _advance(core, key, remote, followed, send)  # what it stored before the lease went
    if followed.invocation_id is None:  # nothing of the run in flight was stored
        await send(_ending(core, key, remote, newest_id))
        return
    with trio.move_on_after(core.cluster.end_wait):  # ended: its announcement follows
        await remote.wait(followed.invocation_id)
    await _advance(core, key, remote, followed, send)  # what it committed before it ended
    await send(_ending(core, key, remote, followed.invocation_id))


async def _advance(
    core: ServerCore, key: SessionKey, remote: RemoteEnd, followed: _Followed, send: FrameSend
) -> None:
    """Send what the run followed stored since the follower last looked; when a run of another
    invocation stored an event and the one followed was not in flight, follow that one."""
    await _replay_run(core, key, followed, send)
    if (
        followed.over
        and not followed.freed
        and not await _was_in_flight(core, key, remote, followed)
    ):
        followed.invocation_id, followed.over = None, False
        await _replay_run(core, key, followed, send)


async def _was_in_flight(
    core: ServerCore, key: SessionKey, remote: RemoteEnd, followed: _Followed
) -> bool:
    """Whether the run followed was the one in flight when the follower came, now that a run
    of another invocation stored an event: it was if an event of it was stored since, if
    another holder has the lease now (the holder then let go: it died, as it announced no
    end), or if its end is announced (at most ``end_wait`` later); else it had ended
    unannounced before."""
    if followed.confirmed:
        return True
    holder = await core.cluster.holder(key)
    if holder is not None and holder != followed.holder:
        return True
    with trio.move_on_after(core.cluster.end_wait):
        await remote.wait(followed.invocation_id)
        return True
    return False


async def _replay_run(
    core: ServerCore, key: SessionKey, followed: _Followed, send: FrameSend
) -> None:
    """Send the run's events stored since the follower last looked (the first one names the
    run when it is not known yet), up to an event of another invocation (the run is over)."""
    if followed.over:
        return
    events = await _stored(core, key)
    paths = core.node_paths(key[0])
    for index in range(followed.seen, len(events)):
        event = events[index]
        if followed.invocation_id is None:
            followed.invocation_id = event.invocation_id
        elif event.invocation_id != followed.invocation_id:
            followed.over = True
            return
        followed.seen, followed.confirmed = index + 1, True
        if index >= followed.last:
            await send(event_frame(event, index + 1, paths))
            followed.last = index + 1


async def _replay(
    core: ServerCore, key: SessionKey, after: int, send: FrameSend
) -> tuple[int, Event | None]:
    """Send the stored events after seq ``after``; return the last seq and the newest event."""
    return await _send_stored(core, key, await _stored(core, key), after, send)


async def _send_stored(
    core: ServerCore, key: SessionKey, events: Sequence[Event], after: int, send: FrameSend
) -> tuple[int, Event | None]:
    """Send ``events`` after seq ``after``; return the last seq and the newest event."""
    paths = core.node_paths(key[0])
    for index in range(after, len(events)):
        await send(event_frame(events[index], index + 1, paths))
    return max(after, len(events)), (events[-1] if events else None)


async def _stored(core: ServerCore, key: SessionKey) -> Sequence[Event]:
    """The session's stored events (none once it is deleted)."""
    app_name, user_id, session_id = key
    session = await core.session_service.get_session(
        app_name=app_name, user_id=user_id, session_id=session_id
    )
    return () if session is None else session.events
