"""Server processes for the server benchmark: ``trio-agents api-server`` and ``adk api_server``.

Each is a subprocess on 127.0.0.1 that :func:`running` starts, waits for, and stops (SIGINT,
then SIGKILL after a grace period) however the block exits, so no process is left behind.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = Path(__file__).resolve().parent / "server_apps"
START_TIMEOUT = 60.0


@dataclass
class Server:
    """One running server process: its base ``url`` and ``pid``."""

    url: str
    process: subprocess.Popen[bytes]

    def peak_rss_mb(self) -> float:
        """The process's peak resident set (``VmHWM``) in MiB, 0 if it cannot be read."""
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return 0.0
        found = re.search(r"VmHWM:\s+(\d+) kB", status)
        return int(found[1]) / 1024 if found else 0.0

    def cpu_seconds(self) -> float:
        """CPU time (user + system, every thread) the process and its children used so far."""
        return sum(_cpu_seconds(pid) for pid in _tree(self.process.pid))


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """``utime + stime`` of ``pid`` from ``/proc/<pid>/stat`` (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a server may run workers in child processes)."""
    found: list[int] = []
    waiting = [pid]
    while waiting:
        parent = waiting.pop()
        found.append(parent)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{parent}/task").iterdir():
                with contextlib.suppress(OSError):
                    waiting += [int(child) for child in (task / "children").read_text().split()]
    return found


def adk_available() -> bool:
    """Whether this interpreter has google-adk and its ``adk`` command."""
    import importlib.util

    return importlib.util.find_spec("google.adk") is not None and _adk_command().exists()


def _adk_command() -> Path:
    return Path(sys.executable).parent / "adk"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_trio(process: subprocess.Popen[bytes], log: int) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    seen = b""
    while b"Ctrl-C to stop" not in seen:
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"trio-agents api-server did not start:\n{seen.decode()}")
        time.sleep(0.05)
        seen = os.pread(log, 1 << 16, 0)
    found = re.search(rb"serving .* at (http://\S+)", seen)
    if not found:
        raise RuntimeError(f"no URL in the output of trio-agents api-server:\n{seen.decode()}")
    return found[1].decode().rstrip("/")


def _wait_http(process: subprocess.Popen[bytes], url: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"adk api_server exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/list-apps", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("adk api_server did not answer /list-apps in time")


def _pinned(cpus: set[int] | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` binding the child to ``cpus`` (None: no binding)."""
    if cpus is None:
        return None
    return functools.partial(os.sched_setaffinity, 0, cpus)


def _start_trio(store: str, log: int, cpus: set[int] | None) -> Server:
    command = [sys.executable, "-m", "trio_agents", "api-server", str(APPS / "trio")]
    command += ["--port", "0", "--session-service", store, "--graceful-timeout", "1"]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_pinned(cpus),
    )
    try:
        url = _wait_trio(process, log)
    except BaseException:
        _stop(process)
        raise
    return Server(url, process)


def _start_adk(store: str, log: int, cpus: set[int] | None) -> Server:
    port = _free_port()
    command = [str(_adk_command()), "api_server", "--port", str(port), "--host", "127.0.0.1"]
    command += ["--session_service_uri", store, "--log_level", "error", str(APPS / "adk")]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        preexec_fn=_pinned(cpus),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_http(process, url)
    except BaseException:
        _stop(process)
        raise
    return Server(url, process)


@contextlib.contextmanager
def running(
    impl: str, store: str, processes: int = 1, cpus: set[int] | None = None
) -> Iterator[list[Server]]:
    """Start ``processes`` servers of ``impl`` on the session store URI ``store``; stop them all.

    ``cpus``: the cores the servers may run on (by default, any).
    """
    start = _start_trio if impl == "trio_agents" else _start_adk
    servers: list[Server] = []
    with contextlib.ExitStack() as logs:
        try:
            for _ in range(processes):
                log = logs.enter_context(tempfile.TemporaryFile())
                servers.append(start(store, log.fileno(), cpus))
            yield servers
        finally:
            for server in servers:
                _stop(server.process)
