"""A throwaway PostgreSQL cluster on 127.0.0.1 for the tests (started once per test process).

``ensure_cluster()`` returns a DSN for a fresh, empty schema on the cluster, starting the cluster
first if needed: ``initdb`` and ``pg_ctl`` run as the ``postgres`` user when we are root (initdb
refuses root), on a free port, with data and socket in a temporary directory. The cluster stops
and its directory is removed when the test process exits, whether the tests passed or not.
Without PostgreSQL binaries the tests are skipped locally and fail under ``CI=true``
(``.ci/run`` installs them).
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import threading

import pytest

_state: dict[str, str] = {}
_schemas = itertools.count()
_lock = threading.Lock()


def _bin_dir() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run(command: list[str]) -> None:
    done = subprocess.run(
        _as_postgres(command), capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if done.returncode:
        raise RuntimeError(
            f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _start() -> str:
    bin_dir = _bin_dir()
    if bin_dir is None:
        message = "PostgreSQL is not installed (apt-get install postgresql)"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    root = tempfile.mkdtemp(prefix="trio-agents-pg-")
    data = os.path.join(root, "data")

    def stop() -> None:
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(
                _as_postgres([f"{bin_dir}/pg_ctl", "-D", data, "-m", "immediate", "stop"]),
                capture_output=True,
                stdin=subprocess.DEVNULL,
            )
        shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)
    os.chmod(root, 0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    port = _free_port()
    _run([f"{bin_dir}/initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"])
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    log = os.path.join(root, "log")
    _state.update(pg_ctl=f"{bin_dir}/pg_ctl", data=data, options=options, log=log)
    _run([f"{bin_dir}/pg_ctl", "-D", data, "-o", options, "-w", "-l", log, "start"])
    return f"host=127.0.0.1 port={port} user=postgres"


def stop_cluster() -> None:
    """Stop the test cluster at once (an outage: every connection to it breaks, and new ones
    are refused until :func:`start_cluster`). Blocking: waits until the server has exited."""
    _run([_state["pg_ctl"], "-D", _state["data"], "-m", "immediate", "-w", "stop"])


def start_cluster() -> None:
    """Start the test cluster again after :func:`stop_cluster` (same port, same data)."""
    command = [_state["pg_ctl"], "-D", _state["data"], "-o", _state["options"], "-w"]
    _run([*command, "-l", _state["log"], "start"])


def ensure_cluster() -> str:
    """A DSN whose tables land in a new, empty schema on the test cluster (fast isolation)."""
    import psycopg

    with _lock:
        if "base" not in _state:
            base = _start()
            with psycopg.connect(f"{base} dbname=postgres", autocommit=True) as conn:
                conn.execute("CREATE DATABASE trio_agents_tests")
            _state["base"] = base
        schema = f"s{os.getpid()}_{next(_schemas)}"
    dsn = f"{_state['base']} dbname=trio_agents_tests"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{dsn} options=-csearch_path={schema}"
