"""``python -m benchmarks.serve_profile``: what a served run costs the server, in process.

Drives the ASGI app of :func:`trio_agents.server.create_app` directly under Trio (no HTTP stack,
no client library): per run, ``POST …/sessions`` then ``POST /run_sse`` with ``"streaming":
false``, reading the stream to its terminal frame, on the benchmark apps of
``benchmarks/server_apps/trio`` (``emit20``: 20 events with a state delta each; ``tool1``: an
``LlmAgent`` with one tool call). Three ways to look:

* ``--callgrind`` (default): instruction counts under ``valgrind --tool=callgrind`` of
  ``--runs`` runs after a few warm-up ones (the process marks where they start and end, and
  callgrind dumps its counts there: start-up and first-use costs drop out), for the ASGI app
  with dev routes off and on and for the Runner alone (no server). Instruction counts are
  steady on a shared, noisy machine; times are not.
* ``--cprofile``: the functions a served run spends its time in (``--app``, ``--mode``).
* ``--once``: one in-process load (``--app``, ``--mode``, ``--runs``), printing wall time per run.

* ``--served``: ``trio-agents api-server`` itself (its HTTP server, the dev routes, as the server
  benchmark starts it) under callgrind, driven over HTTP one run after the other, each request on
  a connection of its own: instructions per run as the marginal cost of ``--runs`` more runs
  (two server processes, 5 and 5 + ``--runs`` runs).

``--apps emit0`` measures ``emit20``'s agent emitting no event: what a run costs besides its
events.

Nothing here is asserted as a timing; a run that does not end with ``event: done`` aborts.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import importlib
import json
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import trio

APPS = ("emit20", "tool1")
EXTRA_APPS = ("emit0",)
"""``emit0``: ``emit20``'s agent emitting no event (a run's cost besides its events)."""
MODES = ("runner", "asgi", "asgi-dev")


def _agent(app: str) -> Any:
    if app == "emit0":  # what a run costs besides its events
        emitter = importlib.import_module("benchmarks.server_apps.trio.emit20").Emitter
        return emitter(name="emit0", count=0)
    return importlib.import_module(f"benchmarks.server_apps.trio.{app}").root_agent


# -- a minimal ASGI client ------------------------------------------------------------------------


async def _call(asgi: Any, method: str, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    """One request to ``asgi``: its status and whole body (the client stays until the end)."""
    payload = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    done = trio.Event()
    sent = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:  # ruff: ignore[unused-async]
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    await asgi(scope, receive, send)
    done.set()
    return status, b"".join(chunks)


@contextlib.asynccontextmanager
async def _served(app: str, *, dev: bool) -> AsyncIterator[Any]:
    from trio_agents.server import create_app
    from trio_agents.sessions import InMemorySessionService

    asgi = create_app({app: _agent(app)}, session_service=InMemorySessionService(), dev_routes=dev)
    async with asgi.router.lifespan_context(asgi):
        yield asgi


async def _served_run(asgi: Any, app: str, index: int) -> None:
    status, created = await _call(asgi, "POST", f"/apps/{app}/users/u/sessions", {})
    if status != 200:
        raise SystemExit(f"session create: {status} {created[:200]!r}")
    session_id = json.loads(created)["id"]
    body = {
        "appName": app,
        "userId": "u",
        "sessionId": session_id,
        "newMessage": {"role": "user", "parts": [{"text": f"go {index}"}]},
        "streaming": False,
    }
    status, stream = await _call(asgi, "POST", "/run_sse", body)
    if status != 200 or b"event: done\n" not in stream:
        raise SystemExit(f"run: {status} {stream[-300:]!r}")


WARM_RUNS = 5
"""Runs before the measured ones: imports, first-use caches and the like are paid there."""


def _mark() -> None:
    """Where the measured runs start and end, for ``callgrind --dump-before=getppid``."""
    os.getppid()


async def _load_asgi(app: str, runs: int, *, dev: bool) -> float:
    async with _served(app, dev=dev) as asgi:
        for index in range(WARM_RUNS):
            await _served_run(asgi, app, index)
        _mark()
        start = time.perf_counter()
        for index in range(runs):
            await _served_run(asgi, app, index)
        elapsed = time.perf_counter() - start
        _mark()
        return elapsed


async def _load_runner(app: str, runs: int) -> float:
    from trio_agents import Content, Part, Runner
    from trio_agents.sessions import InMemorySessionService

    sessions = InMemorySessionService()
    runner = Runner(agent=_agent(app), app_name=app, session_service=sessions)

    async def run(index: int) -> None:
        session = await sessions.create_session(app_name=app, user_id="u")
        message = Content(role="user", parts=[Part(text=f"go {index}")])
        async with runner.run(user_id="u", session_id=session.id, new_message=message) as stream:
            async for _ in stream:
                pass

    for index in range(WARM_RUNS):
        await run(index)
    _mark()
    start = time.perf_counter()
    for index in range(runs):
        await run(index)
    elapsed = time.perf_counter() - start
    _mark()
    return elapsed


async def _load(mode: str, app: str, runs: int) -> float:
    if mode == "runner":
        return await _load_runner(app, runs)
    return await _load_asgi(app, runs, dev=mode == "asgi-dev")


# -- callgrind -------------------------------------------------------------------------------------


def _instructions(mode: str, app: str, runs: int, gc_off: bool) -> int:
    """Instructions (Ir) of ``runs`` runs after the warm-up ones, under callgrind: the process
    marks where they start and end, and callgrind dumps its counts there."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=getppid",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "benchmarks.serve_profile",
            "--once",
            "--mode",
            mode,
            "--app",
            app,
            "--runs",
            str(runs),
            *(["--gc-off"] if gc_off else []),
        ]
        subprocess.run(command, check=True, capture_output=True)
        parts = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
        if len(parts) < 2:
            raise SystemExit(f"expected a dump at each mark, got {[p.name for p in parts]}")
        match = re.search(r"^(?:summary|totals): (\d+)", parts[1].read_text(), re.MULTILINE)
        if match is None:
            raise SystemExit(f"no instruction total in {parts[1]}")
        return int(match.group(1))


def _callgrind(apps: list[str], modes: list[str], runs: int, gc_off: bool) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    collector = ", cyclic garbage collector off" if gc_off else ""
    print(f"instructions per run: {runs} runs after {WARM_RUNS} warm-up runs{collector}")
    print("| app | mode | M instructions per run |")
    print("|---|---|---|")
    for app in apps:
        for mode in modes:
            per_run = _instructions(mode, app, runs, gc_off) / runs
            print(f"| {app} | {mode} | {per_run / 1e6:.2f} |", flush=True)


# -- the real server under callgrind ---------------------------------------------------------------

SERVED_START_TIMEOUT = 900.0
"""Seconds ``trio-agents api-server`` may take to start under valgrind."""


async def _http_runs(url: str, app: str, runs: int) -> None:
    """``runs`` runs over HTTP, one after the other, each request on a connection of its own."""
    import httpx

    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as client:
        for index in range(runs):
            created = await client.post(f"/apps/{app}/users/u/sessions", json={})
            created.raise_for_status()
            body = {
                "appName": app,
                "userId": "u",
                "sessionId": created.json()["id"],
                "newMessage": {"role": "user", "parts": [{"text": f"go {index}"}]},
                "streaming": False,
            }
            answer = await client.post("/run_sse", json=body)
            if answer.status_code != 200 or "event: done\n" not in answer.text:
                raise SystemExit(f"run: {answer.status_code} {answer.text[-300:]!r}")


def _served_total(app: str, runs: int) -> int:
    """Instructions of a whole ``trio-agents api-server`` process (start, ``runs`` runs over
    HTTP, stop) under callgrind."""
    with tempfile.TemporaryDirectory() as tmp:
        out, log = Path(tmp) / "callgrind.out", Path(tmp) / "server.log"
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
        command += [
            "-m",
            "trio_agents",
            "api-server",
            str(Path(__file__).parent / "server_apps" / "trio"),
        ]
        command += ["--port", "0", "--graceful-timeout", "1"]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        with log.open("wb") as sink:
            server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
        try:
            url = _served_url(server, log)
            trio.run(_http_runs, url, app, runs)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=SERVED_START_TIMEOUT)
        match = re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.MULTILINE)
        if match is None:
            raise SystemExit(f"no instruction total in {out}")
        return int(match.group(1))


def _served_url(server: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + SERVED_START_TIMEOUT
    while time.monotonic() < deadline and server.poll() is None:
        found = re.search(r"serving .* at (http://\S+)", log.read_text(errors="replace"))
        if found:
            return found[1].rstrip("/")
        time.sleep(0.5)
    raise SystemExit(f"trio-agents api-server did not start:\n{log.read_text(errors='replace')}")


def _served_per_run(apps: list[str], low: int, high: int) -> None:
    print(f"the real server: instructions per run, marginal cost of {high - low} more runs")
    print("| app | M instructions per run |")
    print("|---|---|")
    for app in apps:
        extra = _served_total(app, high) - _served_total(app, low)
        print(f"| {app} | {extra / (high - low) / 1e6:.2f} |", flush=True)


def _profile(mode: str, app: str, runs: int, top: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    trio.run(_load, mode, app, runs)
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--callgrind", action="store_true", help="instruction counts (default)")
    how.add_argument("--cprofile", action="store_true", help="cProfile of --mode/--app")
    how.add_argument("--once", action="store_true", help="one load of --mode/--app, timed")
    how.add_argument("--served", action="store_true", help="the real server under callgrind")
    parser.add_argument("--app", choices=APPS + EXTRA_APPS, default="emit20")
    parser.add_argument("--apps", default=",".join(APPS), help="apps for --callgrind")
    parser.add_argument("--mode", choices=MODES, default="asgi-dev")
    parser.add_argument("--modes", default=",".join(MODES), help="modes for --callgrind")
    parser.add_argument("--runs", type=int, help="measured runs (default 20, 200 timed)")
    parser.add_argument("--top", type=int, default=40, help="--cprofile: functions shown")
    parser.add_argument(
        "--gc-off",
        action="store_true",
        help="--callgrind/--once: the cyclic garbage collector off (a full collection, about"
        " 19 M instructions, moves a 20-run figure by about 1 M when one falls in it)",
    )
    args = parser.parse_args(argv)
    if args.gc_off:
        gc.disable()
    if args.once:
        runs = args.runs or 200
        elapsed = trio.run(_load, args.mode, args.app, runs)
        print(f"{args.mode} {args.app}: {runs} runs, {elapsed / runs * 1e3:.3f} ms/run")
    elif args.served:
        _served_per_run(args.apps.split(","), 5, 5 + (args.runs or 20))
    elif args.cprofile:
        _profile(args.mode, args.app, args.runs or 200, args.top)
    else:
        _callgrind(args.apps.split(","), args.modes.split(","), args.runs or 20, args.gc_off)


if __name__ == "__main__":
    main()
