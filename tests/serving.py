"""``trio-agents api-server`` / ``web`` as a real subprocess on a free port of 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
APPS = "tests/cli_apps"
"""A directory target with the apps ``fanout`` (a ParallelAgent) and ``slow`` (until cancelled)."""

READY = "Ctrl-C to stop"


class Served:
    """A running server command: its ``url``, and ``stop()`` to Ctrl-C it."""

    def __init__(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        self.process = process
        self.timeout = timeout
        self.output = _read_until(process, READY, timeout)
        found = re.search(r"serving .* at (http://\S+)", self.output)
        assert found, self.output
        self.url = found[1]

    def stop(self) -> int:
        """Send SIGINT (Ctrl-C), wait for the exit, return its status (all output in ``output``)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            rest, _ = self.process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            rest, _ = self.process.communicate()
            raise
        self.output += rest.decode()
        return self.process.returncode


def _read_until(process: subprocess.Popen[bytes], marker: str, timeout: float) -> str:
    assert process.stdout is not None
    fd = process.stdout.fileno()
    deadline = time.monotonic() + timeout
    seen = b""
    while marker.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or process.poll() is not None:
            process.kill()
            raise AssertionError(f"the server did not start:\n{seen.decode()}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            seen += os.read(fd, 65536)
    return seen.decode()


@contextlib.contextmanager
def served(
    command: str, *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> Iterator[Served]:
    """Run ``trio-agents <command> <args> --port 0``; yield once it listens; stop it on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "trio_agents", command, *args, "--port", "0"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    try:
        yield Served(process, timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=timeout)


def postgres_uri() -> str:
    """The test cluster's DSN (a fresh schema) as the ``postgresql://`` URI the CLI takes."""
    from psycopg.conninfo import conninfo_to_dict

    from tests.pg_cluster import ensure_cluster

    parts = conninfo_to_dict(ensure_cluster())
    query = urlencode({"options": parts["options"]})
    return f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}?{query}"


@contextlib.contextmanager
def served_together(apps: str, count: int = 3) -> Iterator[list[Served]]:
    """``count`` ``api-server`` processes serving ``apps`` on one fresh PostgreSQL schema; each
    must exit cleanly when stopped."""
    uri = postgres_uri()
    with contextlib.ExitStack() as stack:
        running = [
            stack.enter_context(served("api-server", apps, "--session-service", uri))
            for _ in range(count)
        ]
        try:
            yield running
        except BaseException:
            raise  # each is killed on the way out
        for server in running:
            assert server.stop() == 0, server.output
