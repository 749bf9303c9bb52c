"""McpToolset against a server written with the SDK's own server API, over stdio."""

from __future__ import annotations

import sys

import pytest
import trio

from trio_agents import ConfigurationError, McpServerError
from trio_agents.tools.mcp import (
    McpToolset,
    SseConnectionParams,
    StdioConnectionParams,
    StdioServerParameters,
    StreamableHTTPConnectionParams,
)

from .helpers import app, call, cancel_once_calling, child_pids, responses, run_turn, sdk_params

GUARD = 60  # a deadline against hangs, never a timing assertion


# -- construction -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [None, "npx server", {"command": "x"}, 42],
)
def test_malformed_connection_params(params: object) -> None:
    with pytest.raises(ConfigurationError, match="connection_params"):
        McpToolset(connection_params=params)


def test_empty_command() -> None:
    with pytest.raises(ConfigurationError, match="command is empty"):
        StdioConnectionParams(server_params=StdioServerParameters(command="  "))


@pytest.mark.parametrize("url", ["ftp://example.org/mcp", "localhost:8000/mcp", "file:///x", ""])
@pytest.mark.parametrize("shape", [StreamableHTTPConnectionParams, SseConnectionParams])
def test_url_must_be_http(shape: type, url: str) -> None:
    with pytest.raises(ConfigurationError, match="http"):
        shape(url=url)


def test_bad_timeout_and_headers() -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        StreamableHTTPConnectionParams(url="http://127.0.0.1:1/mcp", timeout=0)
    with pytest.raises(ConfigurationError, match="headers"):
        StreamableHTTPConnectionParams(url="http://127.0.0.1:1/mcp", headers={"a": 1})
    with pytest.raises(ConfigurationError, match="server_params"):
        StdioConnectionParams(server_params="python server.py")


def test_bare_server_parameters_are_accepted() -> None:
    toolset = McpToolset(connection_params=StdioServerParameters(command="node", args=["s.js"]))
    assert isinstance(toolset.connection_params, StdioConnectionParams)
    assert toolset.server == "node s.js"


# -- listing and calling ----------------------------------------------------------------------


async def test_lists_tools_with_schemas() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    with trio.fail_after(GUARD):
        tools = {tool.name: tool for tool in await toolset.get_tools()}
    assert {"add", "pid", "fail", "die", "picture", "grow"} <= set(tools)
    declaration = tools["add"].declaration()
    assert declaration.description == "Add two integers."
    assert declaration.parameters is not None
    assert set(declaration.parameters["properties"]) == {"a", "b"}  # type: ignore[arg-type]
    assert child_pids() == set()  # no scope: the listing's session was closed


async def test_filter_and_prefix_apply_to_server_tools() -> None:
    toolset = McpToolset(
        connection_params=sdk_params(), tool_filter=["add", "pid"], tool_name_prefix="calc"
    )
    with trio.fail_after(GUARD):
        assert {t.name for t in await toolset.get_tools()} == {"add", "pid"}
        renamed = await toolset.get_tools_with_prefix()
    assert {t.name for t in renamed} == {"calc_add", "calc_pid"}
    assert {t.declaration().name for t in renamed} == {"calc_add", "calc_pid"}


async def test_agent_calls_a_tool_and_reads_the_result() -> None:
    toolset = McpToolset(connection_params=sdk_params(), tool_name_prefix="calc")
    runner, model = app(toolset, [call("calc_add", a=2, b=40), "done"])
    with trio.fail_after(GUARD):
        events = await run_turn(runner)
    (response,) = responses(events)
    assert response["content"] == [{"type": "text", "text": "42"}]
    assert response["structuredContent"] == {"result": 42}
    assert not response.get("isError")
    assert "calc_add" in [d.name for d in model.requests[0].tools]
    assert events[-1].text == "done"
    assert child_pids() == set()  # the invocation's session closed with it


async def test_image_content_is_inline_data() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("picture"), "ok"])
    with trio.fail_after(GUARD):
        (response,) = responses(await run_turn(runner))
    text, image = response["content"]
    assert text == {"type": "text", "text": "a pixel"}
    assert image["type"] == "image"
    assert image["mimeType"] == "image/png"
    assert image["data"].startswith("iVBORw0KGgo")


async def test_error_result_becomes_an_error_response() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("fail", reason="nope"), "recovered"])
    with trio.fail_after(GUARD):
        events = await run_turn(runner)
    (response,) = responses(events)
    assert response["isError"] is True
    assert "failing on purpose: nope" in response["error"]
    assert events[-1].text == "recovered"


async def test_arguments_failing_the_schema_get_the_servers_error() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("add", a="two", b=[]), "ok"])
    with trio.fail_after(GUARD):
        (response,) = responses(await run_turn(runner))
    assert response["isError"] is True
    assert "add" in response["error"]
    assert "valid" in response["error"].lower()


async def test_hallucinated_tool_name_is_an_error_response() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("delete_everything"), "sorry"])
    with trio.fail_after(GUARD):
        (response,) = responses(await run_turn(runner))
    assert "delete_everything" in response["error"]
    assert "add" in response["error"]  # the model is told which tools exist


async def test_unlisted_name_sent_to_the_server_is_an_error_response() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    (tool,) = [t for t in await toolset.get_tools() if t.name == "add"]
    tool.remote_name = "no_such_tool"  # type: ignore[attr-defined]
    runner, _ = app(toolset, [call("add", a=1, b=2), "ok"])
    from trio_agents.agents import LlmAgent  # the listed tool, aimed at a name the server lacks

    runner.agent = LlmAgent(name="assistant", model=runner.agent.model, tools=[tool])  # type: ignore[attr-defined]
    with trio.fail_after(GUARD):
        (response,) = responses(await run_turn(runner))
    assert response["isError"] is True
    assert "no_such_tool" in response["error"]


async def test_list_changed_notification_refreshes_the_tools() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, model = app(toolset, [call("grow"), call("extra"), "end"])
    async with runner:
        with trio.fail_after(GUARD):
            events = await run_turn(runner)
    first, second = responses(events)
    assert first["content"][0]["text"] == "grown"
    assert second["content"][0]["text"] == "extra answer"
    names = [[d.name for d in request.tools] for request in model.requests]
    assert "extra" not in names[0]
    assert "extra" in names[1]


# -- lifetimes ----------------------------------------------------------------------------------


async def test_runner_context_reuses_one_server_and_stops_it() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("pid"), "a", call("pid"), "b"])
    async with runner:
        with trio.fail_after(GUARD):
            first = responses(await run_turn(runner, session_id="one"))
            second = responses(await run_turn(runner, session_id="two"))
        pid = first[0]["structuredContent"]["result"]
        assert second[0]["structuredContent"]["result"] == pid
        assert child_pids() == {pid}
    assert child_pids() == set()


async def test_without_runner_context_each_invocation_has_its_own_server() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("pid"), "a", call("pid"), "b"])
    with trio.fail_after(GUARD):
        first = responses(await run_turn(runner, session_id="one"))
        assert child_pids() == set()
        second = responses(await run_turn(runner, session_id="two"))
    assert first[0]["structuredContent"]["result"] != second[0]["structuredContent"]["result"]
    assert child_pids() == set()


async def test_cancelled_call_leaves_the_session_usable() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("wait_forever"), call("pid"), "b"])
    async with runner:
        with trio.fail_after(GUARD):
            (pid,) = await cancel_once_calling(runner)
            assert child_pids() == {pid}
            after = responses(await run_turn(runner, session_id="s"))
        assert after[-1]["structuredContent"]["result"] == pid
    assert child_pids() == set()


async def test_cancelled_run_without_runner_context_stops_the_server() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("wait_forever")])
    with trio.fail_after(GUARD):
        assert len(await cancel_once_calling(runner)) == 1
    assert child_pids() == set()
    session = await runner.session_service.get_session(
        app_name="mcp-tests", user_id="u", session_id="s"
    )
    assert session is not None
    assert responses(session.events)[-1]["error"] == "cancelled"  # the open call was sealed


async def test_server_killed_mid_call_is_a_typed_error_then_reconnects() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("die"), call("pid"), "back"])
    async with runner:
        with trio.fail_after(GUARD):
            with pytest.raises(McpServerError) as caught:
                await run_turn(runner, session_id="one")
            assert caught.value.server == f"{sys.executable} {caught.value.server.split(' ', 1)[1]}"
            assert "sdk_server.py" in str(caught.value)
            assert "dying mid-call" in caught.value.stderr_tail
            assert "dying mid-call" in str(caught.value)
            assert child_pids() == set()
            events = await run_turn(runner, session_id="two")
        assert isinstance(responses(events)[0]["structuredContent"]["result"], int)
        assert events[-1].text == "back"
    assert child_pids() == set()


async def test_server_that_is_not_there() -> None:
    params = StdioConnectionParams(
        server_params=StdioServerParameters(command="/nonexistent/mcp-server", args=["--x"])
    )
    runner, _ = app(McpToolset(connection_params=params), ["unused"])
    with trio.fail_after(GUARD), pytest.raises(McpServerError) as caught:
        await run_turn(runner)
    assert "/nonexistent/mcp-server --x" in str(caught.value)
    assert "could not be started" in str(caught.value)


async def test_server_that_exits_at_start_quotes_its_stderr() -> None:
    toolset = McpToolset(connection_params=sdk_params("exit"))
    with trio.fail_after(GUARD), pytest.raises(McpServerError) as caught:
        await toolset.get_tools()
    assert "refusing to start" in caught.value.stderr_tail
    assert "sdk_server.py exit" in caught.value.server
    assert child_pids() == set()


async def test_malformed_json_rpc_is_a_typed_error_without_hanging() -> None:
    toolset = McpToolset(connection_params=sdk_params("garbage", timeout=20))
    with trio.fail_after(GUARD), pytest.raises(McpServerError) as caught:
        await toolset.get_tools()
    assert "not MCP" in str(caught.value)
    assert "sdk_server.py garbage" in str(caught.value)
    assert child_pids() == set()


async def test_http_server_that_is_not_there() -> None:
    toolset = McpToolset(
        connection_params=StreamableHTTPConnectionParams(url="http://127.0.0.1:9/mcp", timeout=5)
    )
    with trio.fail_after(GUARD), pytest.raises(McpServerError) as caught:
        await toolset.get_tools()
    assert "http://127.0.0.1:9/mcp" in str(caught.value)


async def test_close_stops_the_servers_of_the_runner_scope() -> None:
    toolset = McpToolset(connection_params=sdk_params())
    runner, _ = app(toolset, [call("pid"), "a"])
    async with runner:
        with trio.fail_after(GUARD):
            await run_turn(runner)
            assert len(child_pids()) == 1
            await toolset.close()
            assert child_pids() == set()
