"""``trio-agents api-server`` and ``web`` as real subprocesses: HTTP requests, then Ctrl-C."""

from __future__ import annotations

import errno
import json
import socket
import struct
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from trio_agents._errors import ConfigurationError
from trio_agents._main import main
from trio_agents.cli._serve import _serve_then_stop

from .serving import APPS, served

TIMEOUT = httpx.Timeout(15)


def _frames(response: httpx.Response) -> list[tuple[str, Any]]:
    """The SSE frames of a response as (event name, data)."""
    frames = []
    for block in response.text.split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        fields = dict(line.split(": ", 1) for line in lines)
        if "data" in fields:
            frames.append((fields.get("event", "message"), json.loads(fields["data"])))
    return frames


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def _run_sse(http: httpx.Client, app: str, session_id: str, text: str) -> list[tuple[str, Any]]:
    body = {
        "appName": app,
        "userId": "u",
        "sessionId": session_id,
        "newMessage": _user(text),
        "streaming": True,
    }
    response = http.post("/run_sse", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return _frames(response)


def test_api_server_serves_a_directory_of_apps_and_stops_on_ctrl_c() -> None:
    with served("api-server", APPS) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
            assert http.get("/health").json() == {"status": "ok"}
            assert http.get("/list-apps").json() == ["fanout", "slow"]
            assert http.get("/dev-ui/").status_code == 404  # the UI is web's
            session = http.post("/apps/fanout/users/u/sessions", json={}).json()
            frames = _run_sse(http, "fanout", session["id"], "go")
            stored = http.get(f"/apps/fanout/users/u/sessions/{session['id']}").json()
            artifacts = http.get(f"/apps/fanout/users/u/sessions/{session['id']}/artifacts")
        assert server.stop() == 0
    kinds = [kind for kind, _ in frames]
    assert kinds[-1] == "done" and kinds.count("message") == len(kinds) - 1
    branches = {data.get("branch") for kind, data in frames if kind == "message"}
    assert {"gather.left", "gather.right"} <= branches
    assert stored["state"]["left_said"] == "Left side here."
    assert stored["state"]["summary"] == "Both branches are done."
    assert artifacts.json() == ["note.txt"]
    assert "SIGINT: shutting down" in server.output
    assert server.output.rstrip().endswith("stopped")
    assert "Traceback" not in server.output


def test_api_server_options_auth_cors_and_a_persistent_session_store(tmp_path: Path) -> None:
    target = "tests.cli_apps.fanout:root_agent"
    db = f"sqlite:///{tmp_path}/sessions.db"
    options = ["--session-service", db, "--cors-origin", "http://ui.example"]
    secret = {"TRIO_AGENTS_AUTH_TOKEN": "s3cret"}
    auth = {"Authorization": "Bearer s3cret"}
    with served("api-server", target, *options, env=secret) as server:
        with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
            assert http.get("/health").status_code == 200  # the probe stays open
            assert http.get("/list-apps").status_code == 401
            assert http.get("/list-apps", headers=auth).json() == ["fanout"]
            preflight = http.options(
                "/run_sse",
                headers={
                    "Origin": "http://ui.example",
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization,content-type",
                },
            )
            created = http.post(
                "/apps/fanout/users/u/sessions", json={"sessionId": "kept"}, headers=auth
            )
        assert server.stop() == 0
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "http://ui.example"
    assert created.status_code == 200
    with served("api-server", target, "--session-service", db) as again:
        with httpx.Client(base_url=again.url, timeout=TIMEOUT) as http:
            kept = http.get("/apps/fanout/users/u/sessions/kept")
        assert again.stop() == 0
    assert kept.status_code == 200  # no token this time: auth is off


def test_web_serves_the_dev_ui_openly_and_the_api_behind_the_token() -> None:
    with served("web", APPS, "--auth-token", "tok") as server:
        with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
            root = http.get("/")
            page = http.get("/dev-ui/")
            script = http.get("/dev-ui/app.js")
            style = http.get("/dev-ui/style.css")
            closed = http.get("/list-apps")
            apps = http.get("/list-apps", headers={"Authorization": "Bearer tok"})
        assert server.stop() == 0
    assert root.status_code == 307 and root.headers["location"] == "/dev-ui/"
    assert page.status_code == 200 and "<title>trio_agents dev UI</title>" in page.text
    assert script.headers["content-type"].startswith(("text/javascript", "application/javascript"))
    assert "/run_sse" in script.text
    assert style.headers["content-type"].startswith("text/css")
    assert closed.status_code == 401
    assert apps.json() == ["fanout", "slow"]
    assert f"dev UI: {server.url}/dev-ui/" in server.output


def test_ctrl_c_cancels_a_streaming_run_which_ends_with_its_terminal_frame() -> None:
    with (
        served("api-server", APPS, "--graceful-timeout", "5") as server,
        httpx.Client(base_url=server.url, timeout=TIMEOUT) as http,
    ):
        session = http.post("/apps/slow/users/u/sessions", json={}).json()
        body = {
            "appName": "slow",
            "userId": "u",
            "sessionId": session["id"],
            "newMessage": _user("go"),
            "streaming": True,
        }
        with http.stream("POST", "/run_sse", json=body) as response:
            lines = response.iter_lines()
            assert next(line for line in lines if line.startswith("data:"))
            assert server.stop() == 0  # the run was still streaming
            rest = list(lines)
    assert "event: cancelled" in rest
    assert "stopped" in server.output
    assert "Traceback" not in server.output


def test_a_bad_target_fails_before_serving(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["api-server", "no_such_module_here:agent"]) == 1
    assert "no module 'no_such_module_here'" in capsys.readouterr().err


def test_without_the_server_extra_the_commands_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "trio_agents.cli._serve", None)  # import fails
    assert main(["web", APPS]) == 1
    assert "needs the 'server' extra" in capsys.readouterr().err


def test_clients_resetting_their_connections_do_not_stop_the_api_server() -> None:
    """A connection reset before the server looks at it (``ENOTCONN`` on its peer's address)
    once took the whole server down, reported as "cannot listen"."""
    with served("api-server", APPS) as server:
        address = httpx.URL(server.url)
        for _ in range(50):
            sock = socket.create_connection((address.host, address.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        with httpx.Client(base_url=server.url, timeout=TIMEOUT) as http:
            assert http.get("/health").json() == {"status": "ok"}
        assert server.stop() == 0
    assert "cannot listen" not in server.output
    assert "Traceback" not in server.output


async def test_an_os_error_after_the_server_listens_is_not_called_a_listen_failure() -> None:
    async def server(*, task_status: trio.TaskStatus[list[str]]) -> None:
        task_status.started(["http://127.0.0.1:1"])
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    with pytest.RaisesGroup(pytest.RaisesGroup(ConnectionResetError)):  # not ConfigurationError
        async with trio.open_nursery() as nursery:
            await nursery.start(_serve_then_stop, server, nursery, "127.0.0.1:1")


async def test_an_os_error_before_the_server_listens_says_where_it_cannot_listen() -> None:
    async def server(*, task_status: trio.TaskStatus[list[str]]) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    async with trio.open_nursery() as nursery:
        with pytest.raises(ConfigurationError, match=r"cannot listen on 127.0.0.1:80: Perm"):
            await nursery.start(_serve_then_stop, server, nursery, "127.0.0.1:80")
