"""McpToolset against the reference MCP servers nobody here wrote (npm and PyPI)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agents import McpServerError
from trio_agents.tools.mcp import (
    McpToolset,
    SseConnectionParams,
    StdioConnectionParams,
    StdioServerParameters,
    StreamableHTTPConnectionParams,
)

from .helpers import (
    EVERYTHING,
    FILESYSTEM,
    TIME_SERVER,
    app,
    call,
    cancel_once_calling,
    child_pids,
    node_params,
    responses,
    run_turn,
)

GUARD = 90

needs_npm_servers = pytest.mark.skipif(
    not EVERYTHING.exists() and not os.environ.get("CI"),
    reason="run `cd .ci/node && npm ci` (CI always does)",
)


@needs_npm_servers
async def test_everything_over_stdio_lists_and_calls() -> None:
    toolset = McpToolset(
        connection_params=node_params(EVERYTHING, "stdio"), tool_filter=["echo", "get-sum"]
    )
    runner, model = app(toolset, [call("echo", message="hello"), call("get-sum", a=2, b=3), "ok"])
    async with runner:
        with trio.fail_after(GUARD):
            events = await run_turn(runner)
    echo, total = responses(events)
    assert echo["content"] == [{"type": "text", "text": "Echo: hello"}]
    assert "5" in total["content"][0]["text"]
    assert sorted(d.name for d in model.requests[0].tools) == ["echo", "get-sum"]
    assert child_pids() == set()


@needs_npm_servers
async def test_everything_image_is_inline_data() -> None:
    toolset = McpToolset(connection_params=node_params(EVERYTHING, "stdio"))
    runner, _ = app(toolset, [call("get-tiny-image"), "ok"])
    with trio.fail_after(GUARD):
        (response,) = responses(await run_turn(runner))
    images = [block for block in response["content"] if block["type"] == "image"]
    assert images
    assert images[0]["mimeType"] == "image/png"
    assert images[0]["data"]


@needs_npm_servers
async def test_everything_cancelled_long_call_then_killed_server() -> None:
    toolset = McpToolset(connection_params=node_params(EVERYTHING, "stdio"))
    runner, _ = app(
        toolset,
        [
            call("trigger-long-running-operation", duration=30, steps=30),
            call("echo", message="still here"),
            "ok",
            call("trigger-long-running-operation", duration=30, steps=30),
            call("echo", message="back"),
            "again",
        ],
    )
    async with runner:
        with trio.fail_after(GUARD):
            (pid,) = await cancel_once_calling(runner)
            after = responses(await run_turn(runner, session_id="s"))
            assert after[-1]["content"][0]["text"] == "Echo: still here"
            assert child_pids() == {pid}

            async def kill_when_in_flight() -> None:
                await trio.testing.wait_all_tasks_blocked()
                os.kill(pid, 9)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(kill_when_in_flight)
                with pytest.raises(McpServerError) as caught:
                    await run_turn(runner, session_id="t")
            assert str(EVERYTHING) in caught.value.server
            assert pid not in child_pids()
            events_after = await run_turn(runner, session_id="u")
            assert responses(events_after)[-1]["content"][0]["text"] == "Echo: back"
    assert child_pids() == set()


async def test_time_server_from_pypi() -> None:
    params = StdioConnectionParams(
        server_params=StdioServerParameters(
            command=str(TIME_SERVER), args=["--local-timezone", "UTC"]
        ),
        timeout=30,
    )
    runner, _ = app(
        McpToolset(connection_params=params),
        [
            call("convert_time", source_timezone="UTC", time="12:00", target_timezone="Asia/Tokyo"),
            call("get_current_time", timezone="Not/AZone"),
            "done",
        ],
    )
    with trio.fail_after(GUARD):
        converted, bad = responses(await run_turn(runner))
    assert "21:00" in converted["content"][0]["text"]
    assert bad["isError"] is True
    assert "Not/AZone" in bad["error"]


@needs_npm_servers
async def test_filesystem_server_reads_a_real_file(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("trio all the way down\n")
    toolset = McpToolset(
        connection_params=node_params(FILESYSTEM, str(tmp_path)),
        tool_filter=lambda tool, ctx: tool.name.startswith("read"),
        tool_name_prefix="fs",
    )
    runner, model = app(
        toolset,
        [
            call("fs_read_text_file", path=str(tmp_path / "note.txt")),
            call("fs_read_text_file", path="/etc/passwd"),
            "done",
        ],
    )
    with trio.fail_after(GUARD):
        inside, outside = responses(await run_turn(runner))
    assert "trio all the way down" in inside["content"][0]["text"]
    assert outside["isError"] is True
    assert all(d.name.startswith("fs_read") for d in model.requests[0].tools)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _start_http_everything(
    transport: str, *, task_status: trio.TaskStatus[trio.Process]
) -> None:
    port = _free_port()
    process = await trio.lowlevel.open_process(
        ["node", str(EVERYTHING), transport],
        env={**os.environ, "PORT": str(port)},
        stderr=-1,  # subprocess.PIPE
        stdout=-3,  # subprocess.DEVNULL
    )
    assert process.stderr is not None
    seen = b""
    while b"on port" not in seen:
        chunk = await process.stderr.receive_some()
        if not chunk:
            raise RuntimeError(f"the HTTP everything server did not start: {seen!r}")
        seen += chunk
    process.port = port  # type: ignore[attr-defined]
    task_status.started(process)
    async with process.stderr:
        while await process.stderr.receive_some():
            pass


# The SDK's streamable HTTP transport iterates httpx2's SSE streams without aclosing() and
# cancels them at shutdown; Trio reports the abandoned generators (a third-party wart).
SDK_SSE_GENERATORS = pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning", "ignore:Async generator 'httpx2"
)


@needs_npm_servers
@SDK_SSE_GENERATORS
@pytest.mark.parametrize("transport", ["streamableHttp", "sse"])
async def test_everything_over_http(transport: str) -> None:
    async with trio.open_nursery() as nursery:
        process = await nursery.start(_start_http_everything, transport)
        try:
            base = f"http://127.0.0.1:{process.port}"
            params = (
                StreamableHTTPConnectionParams(url=f"{base}/mcp", timeout=30)
                if transport == "streamableHttp"
                else SseConnectionParams(url=f"{base}/sse", timeout=30)
            )
            toolset = McpToolset(connection_params=params, tool_filter=["echo"])
            runner, model = app(toolset, [call("echo", message="over http"), "ok"])
            async with runner:
                with trio.fail_after(GUARD):
                    (response,) = responses(await run_turn(runner))
            assert response["content"] == [{"type": "text", "text": "Echo: over http"}]
            assert [d.name for d in model.requests[0].tools] == ["echo"]
        finally:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


def test_python_is_this_one() -> None:
    assert Path(sys.executable).parent == TIME_SERVER.parent
