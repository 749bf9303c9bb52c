"""The clients of the server benchmark: N concurrent clients doing ``/run_sse``, then a check.

Each client runs ``runs`` turns one after the other, each on a session of its own (created by
``POST …/sessions``, not timed). A run counts as done when its SSE stream ends with the terminal
frame: ``event: done`` for trio_agents; for ``adk api_server``, which has no terminal frame, a
stream that ends cleanly with no error frame. After the load, every session is read back
(``GET …/sessions/{id}``) and its events compared with the events its client received. Every
request goes on a connection of its own, through the lean client of
:mod:`benchmarks._wire_client`.
"""

from __future__ import annotations

import collections
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from benchmarks._wire_client import Origin, WireError, request

MESSAGE = {"role": "user", "parts": [{"text": "go"}]}
RETRIES = 30
CHECKS = 16
"""Sessions read back at once after a load."""


@dataclass
class Run:
    """One client turn: where it ran, what the client received, and how long it took."""

    url: str
    app: str
    user: str
    session: str
    events: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    retries: int = 0
    error: str | None = None


@dataclass
class Load:
    """The outcome of one load: wall time, the runs, and the sessions that did not read back."""

    wall: float
    runs: list[Run]
    mismatched: int = 0
    server_cpu: float = 0.0
    """CPU seconds the servers used during the load (the read-back check excluded)."""
    client_cpu: float = 0.0
    """CPU seconds the clients (this process) used during the load."""

    @property
    def done(self) -> list[Run]:
        return [run for run in self.runs if run.error is None]

    def errors(self) -> str:
        """The most common error of the failed runs and its count ('' if none failed)."""
        counts = collections.Counter(run.error for run in self.runs if run.error is not None)
        return "; ".join(f"{count} x {error}" for error, count in counts.most_common(2))

    def retries(self) -> int:
        """How many 503 answers the runs were retried after."""
        return sum(run.retries for run in self.runs)

    def latencies(self) -> list[float]:
        return sorted(run.seconds for run in self.done)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of sorted ``values``, nearest rank; NaN if empty."""
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, round(q * len(values)) - 1))]


def _events_of_stream(lines: list[str], impl: str) -> tuple[list[dict[str, Any]], str | None]:
    """The events of an SSE body and an error (None when it ended with its terminal frame)."""
    events: list[dict[str, Any]] = []
    kind: str | None = None
    terminal: str | None = None
    for line in lines:
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data = json.loads(line[5:])
            if kind is None and "error" not in data:
                events.append(data)
            elif kind is None:
                return events, f"error frame: {data['error']}"[:200]
            else:
                terminal = kind
        elif not line:
            kind = None
    if impl == "trio_agents" and terminal != "done":
        return events, f"stream ended with {terminal!r}, not 'done'"
    return events, None


async def _session(origin: Origin, run: Run) -> None:
    answer = await request(origin, "POST", f"/apps/{run.app}/users/{run.user}/sessions", {})
    if answer.status != 200:
        raise WireError(f"creating a session: HTTP {answer.status}")
    run.session = answer.json()["id"]


async def _turn(origin: Origin, run: Run, impl: str) -> None:
    """One ``/run_sse``; a 503 is retried after its ``Retry-After`` (at most ``RETRIES`` times),
    the wait counted in the run's latency."""
    body: dict[str, Any] = {"app_name": run.app, "user_id": run.user, "session_id": run.session}
    body |= {"new_message": MESSAGE, "streaming": False}
    started = time.perf_counter()
    for _ in range(RETRIES + 1):
        answer = await request(origin, "POST", "/run_sse", body)
        if answer.status != 503:
            break
        run.retries += 1
        await trio.sleep(float(answer.headers.get("retry-after", "1")))
    else:
        run.error = f"HTTP 503 after {RETRIES} retries"
        return
    if answer.status != 200:
        run.error = f"HTTP {answer.status}"
        return
    run.seconds = time.perf_counter() - started
    run.events, run.error = _events_of_stream(answer.lines(), impl)


async def _client(
    urls: list[str], index: int, app: str, impl: str, runs: int, out: list[Run]
) -> None:
    for _ in range(runs):
        run = Run(urls[index % len(urls)], app, f"u{index}", "")
        out.append(run)
        origin = Origin.of(run.url)
        try:
            await _session(origin, run)
            await _turn(origin, run, impl)
        except WireError as exc:
            run.error = str(exc)[:200]


def _same(stored: list[dict[str, Any]], received: list[dict[str, Any]]) -> bool:
    """Whether the session holds the user's message, then exactly the events received."""
    if not stored or stored[0].get("author") != "user" or stored[0].get("content") != MESSAGE:
        return False
    return stored[1:] == received


async def _check(run: Run, bad: list[Run]) -> None:
    path = f"/apps/{run.app}/users/{run.user}/sessions/{run.session}"
    for attempt in range(3):  # a loaded server may drop a connection: a GET is safe to retry
        try:
            answer = await request(Origin.of(run.url), "GET", path)
            break
        except WireError:
            if attempt == 2:
                raise
    stored = answer.json().get("events", []) if answer.status == 200 else None
    if stored is None or not _same(stored, run.events):
        bad.append(run)


async def load(
    urls: list[str],
    impl: str,
    app: str,
    n: int,
    runs: int,
    server_cpu: Callable[[], float] = lambda: 0.0,
) -> Load:
    """``n`` concurrent clients, ``runs`` turns each; then every session read back and compared.

    ``server_cpu`` gives the servers' CPU seconds so far: read before and after the load.
    """
    out: list[Run] = []
    cpu_before, client_before = server_cpu(), time.process_time()
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for index in range(n):
            nursery.start_soon(_client, urls, index, app, impl, runs, out)
    wall = time.perf_counter() - started
    cpu, client_cpu = server_cpu() - cpu_before, time.process_time() - client_before
    bad: list[Run] = []
    limiter = trio.CapacityLimiter(CHECKS)

    async def check(run: Run) -> None:
        async with limiter:
            await _check(run, bad)

    async with trio.open_nursery() as nursery:
        for run in out:
            if run.error is None:
                nursery.start_soon(check, run)
    return Load(wall, out, len(bad), cpu, client_cpu)


async def unloaded(urls: list[str], impl: str, app: str, count: int) -> float:
    """The median time of ``count`` runs one after the other (also warms the server up)."""
    out: list[Run] = []
    for _ in range(count):
        await _client(urls, 0, app, impl, 1, out)
    failed = [run.error for run in out if run.error]
    if failed:
        raise RuntimeError(f"{impl} {app}: an unloaded run failed: {failed[0]}")
    return statistics.median(run.seconds for run in out)
