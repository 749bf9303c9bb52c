"""The routes ADK's own dev UI calls besides the API (``create_app(dev_routes=True)``)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
from hypothesis import given, settings, strategies as st

from tests.server.conftest import Start
from tests.server.helpers import weather_agent
from trio_agents import (
    BaseAgent,
    Content,
    Event,
    InMemoryRunner,
    InvocationContext,
    LlmAgent,
    SequentialAgent,
)
from trio_agents.plugins._manager import PluginManager
from trio_agents.server import TraceRecorder, create_app
from trio_agents.server._graph import dot_source, find_node, node_path
from trio_agents.server._traces import SpanRecorder
from trio_agents.sessions import InMemorySessionService
from trio_agents.testing import ScriptedModel

S = "/apps/weather/users/u1/sessions"
DEV = "/dev/apps/weather"


def _app(**options: Any) -> Any:
    options.setdefault("dev_routes", True)
    return create_app(
        {"weather": weather_agent()}, session_service=InMemorySessionService(), **options
    )


@pytest.fixture
async def url(start_server: Start) -> str:
    return await start_server(_app())


async def _run(client: httpx.AsyncClient, url: str, session: str = "s1") -> list[dict[str, Any]]:
    await client.post(url + S, json={"sessionId": session})
    body = {
        "appName": "weather",
        "userId": "u1",
        "sessionId": session,
        "newMessage": {"role": "user", "parts": [{"text": "weather in Paris?"}]},
    }
    response = await client.post(url + "/run", json=body)
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()
    return events


async def test_telemetry_consent_is_remembered(url: str, client: httpx.AsyncClient) -> None:
    assert (await client.get(url + "/config/telemetry")).json() == {"telemetry": False}
    answer = await client.post(url + "/config/telemetry", json={"telemetry": True})
    assert answer.json() == {"telemetry": True}
    assert (await client.get(url + "/config/telemetry")).json() == {"telemetry": True}
    typo = await client.post(url + "/config/telemetry", json={"telemetri": False})
    assert typo.status_code == 422


async def test_build_graph_describes_the_agent_tree(url: str, client: httpx.AsyncClient) -> None:
    graph = (await client.get(url + DEV + "/build_graph")).json()
    assert graph == {
        "name": "weather",
        "root_agent": {
            "name": "weather",
            "description": "",
            "agent_type": "LlmAgent",
            "model": "scripted",
            "instruction": "Help.",
            "tools": [{"name": "get_weather", "type": "tool"}],
            "sub_agents": [],
        },
    }


@pytest.mark.parametrize("dark", ["false", "true"])
async def test_build_graph_image_is_dot_source(
    url: str, client: httpx.AsyncClient, dark: str
) -> None:
    answer = (await client.get(url + DEV + f"/build_graph_image?dark_mode={dark}")).json()
    assert list(answer) == [""]
    dot = answer[""]["dotSrc"]
    assert dot.startswith("digraph {")
    assert '"weather" -> "weather/get_weather" [style=dashed]' in dot
    assert ("#1E1E1E" in dot) == (dark == "true")


async def test_unknown_apps_and_nodes_are_404(url: str, client: httpx.AsyncClient) -> None:
    nope = await client.get(url + "/dev/apps/nope/build_graph")
    assert (nope.status_code, nope.json()) == (404, {"detail": "App not found: nope"})
    node = await client.get(url + DEV + "/build_graph_image?node=weather/ghost")
    assert (node.status_code, node.json()) == (404, {"detail": "Node not found: weather/ghost"})


async def test_evals_are_empty_lists_and_the_rest_is_501(
    url: str, client: httpx.AsyncClient
) -> None:
    assert (await client.get(url + DEV + "/eval_sets")).json() == []
    assert (await client.get(url + DEV + "/eval_results")).json() == []
    for method, path in [
        ("POST", "/eval-sets"),
        ("GET", "/eval_sets/x/evals"),
        ("POST", "/eval-sets/x/run"),
        ("GET", "/metrics-info"),
    ]:
        answer = await client.request(method, url + DEV + path, json={})
        assert answer.status_code == 501, path
        assert answer.json()["detail"].startswith(
            "trio_agents' server does not implement evaluations"
        )
    tests = await client.get(url + DEV + "/tests")
    assert tests.status_code == 501
    assert "does not implement 'tests'" in tests.json()["detail"]


async def test_builder_is_an_empty_200(url: str, client: httpx.AsyncClient) -> None:
    answer = await client.get(url + DEV + "/builder?ts=1")
    assert (answer.status_code, answer.content) == (200, b"")


async def test_without_dev_routes_they_are_404(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    url = await start_server(_app(dev_routes=False))
    for path in ["/config/telemetry", DEV + "/build_graph", DEV + "/eval_sets"]:
        assert (await client.get(url + path)).status_code == 404


async def test_a_session_trace_has_agent_model_and_tool_spans(
    url: str, client: httpx.AsyncClient
) -> None:
    events = await _run(client, url)
    spans = (await client.get(url + DEV + "/debug/trace/session/s1")).json()
    names = sorted(span["name"] for span in spans)
    assert names == [
        "execute_tool get_weather",
        "generate_content scripted",
        "generate_content scripted",
        "invoke_agent weather",
    ]
    by_name = {span["name"]: span for span in spans}
    agent = by_name["invoke_agent weather"]
    assert agent["parent_span_id"] is None
    assert agent["attributes"]["gen_ai.conversation.id"] == "s1"
    assert {span["trace_id"] for span in spans} == {agent["trace_id"]}
    assert all(s["parent_span_id"] == agent["span_id"] for s in spans if s is not agent)
    assert all(s["start_time"] <= s["end_time"] for s in spans)

    models = [s for s in spans if s["name"].startswith("generate_content")]
    assert [m["attributes"]["gcp.vertex.agent.event_id"] for m in models] == [
        events[0]["id"],
        events[2]["id"],
    ]
    first = models[0]["logs"][0]
    assert first["event_name"] == "gen_ai.client.inference.operation.details"
    details = first["attributes"]
    assert details["gen_ai.input.messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "weather in Paris?"}]}
    ]
    assert details["gen_ai.tool.definitions"][0]["name"] == "get_weather"
    assert details["gen_ai.output.messages"][0]["parts"][0]["type"] == "tool_call"
    tool = by_name["execute_tool get_weather"]["attributes"]
    assert tool["gcp.vertex.agent.event_id"] == events[1]["id"]
    assert tool["gen_ai.tool.call.arguments"] == {"city": "Paris"}


async def test_an_event_s_trace_is_its_span_s_attributes(
    url: str, client: httpx.AsyncClient
) -> None:
    events = await _run(client, url)
    answer = (await client.get(url + DEV + f"/debug/trace/{events[1]['id']}")).json()
    assert answer["gen_ai.operation.name"] == "execute_tool"
    assert answer["gen_ai.tool.name"] == "get_weather"
    missing = await client.get(url + DEV + "/debug/trace/no-such-event")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Trace not found"})
    assert (await client.get(url + DEV + "/debug/trace/session/other")).json() == []


async def test_sessions_of_one_id_in_two_apps_keep_their_traces_apart(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    """Spans were kept by session id alone: one app's trace view showed the other app's spans,
    prompts included (session ids such as ``s1`` are chosen by clients, so they collide)."""
    agents = {"weather": weather_agent(), "other": weather_agent()}
    url = await start_server(
        create_app(agents, session_service=InMemorySessionService(), dev_routes=True)
    )
    ids: dict[str, str] = {}
    for app in agents:
        await client.post(f"{url}/apps/{app}/users/{app}-user/sessions", json={"sessionId": "s1"})
        body = {
            "appName": app,
            "userId": f"{app}-user",
            "sessionId": "s1",
            "newMessage": {"role": "user", "parts": [{"text": f"weather for {app}?"}]},
        }
        events = (await client.post(url + "/run", json=body)).json()
        ids[app] = events[1]["id"]
    for app, other in (("weather", "other"), ("other", "weather")):
        spans = (await client.get(f"{url}/dev/apps/{app}/debug/trace/session/s1")).json()
        assert len(spans) == 4
        assert f"weather for {app}?" in json.dumps(spans)
        assert f"weather for {other}?" not in json.dumps(spans)
        mine = await client.get(f"{url}/dev/apps/{app}/debug/trace/{ids[app]}")
        assert mine.status_code == 200
        theirs = await client.get(f"{url}/dev/apps/{app}/debug/trace/{ids[other]}")
        assert theirs.status_code == 404


async def test_events_over_http_carry_their_author_s_node_path(
    url: str, client: httpx.AsyncClient
) -> None:
    events = await _run(client, url)
    assert [e["nodeInfo"] for e in events] == [{"path": "weather@1"}] * 3
    stored = (await client.get(f"{url}{S}/s1")).json()["events"]
    assert [e.get("nodeInfo") for e in stored] == [None, *[{"path": "weather@1"}] * 3]
    body = {
        "appName": "weather",
        "userId": "u1",
        "sessionId": "s1",
        "newMessage": {"role": "user", "parts": [{"text": "again"}]},
    }
    async with client.stream("POST", url + "/run_sse", json=body) as response:
        lines = [line async for line in response.aiter_lines() if line.startswith("data: {")]
    paths = [json.loads(line[6:]).get("nodeInfo") for line in lines]
    assert paths[:-1] == [{"path": "weather@1"}] * 3  # the terminal frame has none
    assert paths[-1] is None


async def test_nested_agents_get_nested_paths(
    start_server: Start, client: httpx.AsyncClient
) -> None:
    billing = Echo(name="billing")
    app = create_app(
        {"shop": SequentialAgent(name="front", sub_agents=[billing])},
        session_service=InMemorySessionService(),
        dev_routes=True,
    )
    url = await start_server(app)
    await client.post(url + "/apps/shop/users/u/sessions", json={"sessionId": "s"})
    body = {
        "appName": "shop",
        "userId": "u",
        "sessionId": "s",
        "newMessage": {"role": "user", "parts": [{"text": "hi"}]},
    }
    events = (await client.post(url + "/run", json=body)).json()
    assert [e["nodeInfo"]["path"] for e in events] == ["front@1/billing@1"]


class Echo(BaseAgent):
    async def _run_async_impl(self, ctx: InvocationContext) -> None:
        await ctx.emit(Event(content=Content.from_text("ok", role="model")))


def _runner(recorder: SpanRecorder) -> InMemoryRunner:
    return InMemoryRunner(weather_agent(), app_name="weather", plugins=[recorder])


async def _traced(runner: InMemoryRunner, session: str) -> None:
    await runner.session_service.create_session(app_name="weather", user_id="u", session_id=session)
    async with runner.run(user_id="u", session_id=session, new_message="hi") as events:
        async for _ in events:
            pass


@settings(max_examples=20, deadline=None)
@given(
    st.random_module(),
    st.integers(1, 4),
    st.integers(1, 6),
    st.lists(st.sampled_from("abcdef"), min_size=1, max_size=8),
)
def test_the_store_keeps_the_latest_sessions_and_spans_only(
    _: Any, max_sessions: int, max_spans: int, sessions: list[str]
) -> None:
    recorder = TraceRecorder(max_sessions=max_sessions, max_spans=max_spans)

    names = [f"{x}{i}" for i, x in enumerate(sessions)]

    async def main() -> None:
        runner = _runner(recorder)
        async with trio.open_nursery() as nursery:  # concurrent runs on different sessions
            for name in names:
                nursery.start_soon(_traced, runner, name)
        await _traced(runner, "last")  # alone: it keeps its latest spans whole

    trio.run(main)
    with_spans = [name for name in [*names, "last"] if recorder.session_spans(name)]
    assert "last" in with_spans
    assert len(with_spans) <= max_sessions
    assert len(recorder.session_spans("last")) == min(max_spans, 4)
    for name in with_spans:
        spans = recorder.session_spans(name)
        assert len(spans) <= max_spans
        assert all(span.end_time is not None for span in spans)
    assert not recorder._runs  # every invocation's open spans were let go


def test_graph_helpers_walk_the_tree() -> None:
    billing = LlmAgent(name="billing", model=ScriptedModel(lambda r: None))
    root = SequentialAgent(name="front", sub_agents=[billing])
    assert find_node(root, "front@1/billing@1") is billing
    assert find_node(root, "front/nobody") is None
    assert find_node(root, "other") is None
    assert node_path(billing) == "front@1/billing@1"
    assert '"front" -> "billing"' in dot_source(root)
    quoted = dot_source(LlmAgent(name="x", model="m", description='say "hi"'))
    assert '"x" [label="x"' in quoted


async def test_a_recorder_shown_each_served_event_links_spans_as_the_hook_does() -> None:
    """The server shows its recorder each event as it serves it (so runs need no ``on_event``
    hook and commit inline); some come after the run's end (the aftermath of a cancelled run):
    they still find the tool span they answer."""
    hooked, fed, late = TraceRecorder(), SpanRecorder(), SpanRecorder()
    assert not PluginManager([fed]).sees_events
    served: list[Event] = []
    for recorder in (hooked, fed, late):
        runner = _runner(recorder)
        await runner.session_service.create_session(app_name="weather", user_id="u", session_id="s")
        async with runner.run(user_id="u", session_id="s", new_message="hi") as events:
            served = []
            async for event in events:
                served.append(event)
                if recorder is fed:
                    fed.observe(event)
    for event in served:  # after the end
        late.observe(event)

    def links(recorder: SpanRecorder) -> list[tuple[str, bool]]:
        spans = recorder.session_spans("s")
        return [(s.name, "gcp.vertex.agent.event_id" in s.attributes) for s in spans]

    assert links(fed) == links(hooked)
    assert ("execute_tool get_weather", True) in links(fed)
    tool_answer = next(e for e in served if e.get_function_responses())
    span = late.event_span(tool_answer.id)
    assert span is not None and span.name == "execute_tool get_weather"
