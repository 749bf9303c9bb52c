"""The development routes ADK's own dev UI calls besides the API: graph, traces, evals, consent.

- ``GET|POST /config/telemetry``: the consent dialog's answer, remembered by this server
  (trio_agents sends no telemetry anywhere; the answer defaults to ``false``);
- ``GET /dev/apps/{app}/build_graph``: the agent tree as JSON;
- ``GET /dev/apps/{app}/build_graph_image?dark_mode=&node=``: ``{path: {"dotSrc": DOT}}``;
- ``GET /dev/apps/{app}/debug/trace/session/{session}``: the session's spans;
- ``GET /dev/apps/{app}/debug/trace/{event_id}``: the attributes of the span behind an event;
- ``GET /dev/apps/{app}/eval_sets`` and ``…/eval_results``: empty lists; every other evaluation,
  test or deploy route under ``/dev/apps/{app}/`` answers 501 with a message;
- ``GET /dev/apps/{app}/builder``: 200 and an empty body (agents here are defined in code).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..agents import BaseAgent
from ._core import ServerCore
from ._graph import agent_json, dot_source, find_node
from ._http import BodyLimits, Fields, HTTPError, json_response, read_json
from ._traces import SpanRecorder

__all__: list[str] = []  # the routes are reached through create_app(dev_routes=True)

DEV = "/dev/apps/{app_name}"

NOT_IMPLEMENTED = (
    "trio_agents' server does not implement {what}; agent tests run with pytest "
    "(trio_agents.testing)"
)


class DevRoutes:
    """The routes above, over ``core`` and the spans ``traces`` recorded."""

    def __init__(self, core: ServerCore, traces: SpanRecorder, *, body: BodyLimits) -> None:
        self.core = core
        self.traces = traces
        self.body = body
        self.telemetry = False

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/config/telemetry", self.get_telemetry, methods=["GET"]),
            Route("/config/telemetry", self.set_telemetry, methods=["POST"]),
            Route(DEV + "/build_graph", self.build_graph, methods=["GET"]),
            Route(DEV + "/build_graph_image", self.build_graph_image, methods=["GET"]),
            Route(DEV + "/debug/trace/session/{session_id}", self.session_trace, methods=["GET"]),
            Route(DEV + "/debug/trace/{event_id}", self.event_trace, methods=["GET"]),
            Route(DEV + "/eval_sets", self.empty_list, methods=["GET"]),
            Route(DEV + "/eval_results", self.empty_list, methods=["GET"]),
            Route(DEV + "/builder", self.builder, methods=["GET"]),
            Route(
                DEV + "/{rest:path}",
                self.not_implemented,
                methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            ),
        ]

    def _root(self, request: Request) -> BaseAgent:
        return self.core.runner(request.path_params["app_name"]).agent

    async def get_telemetry(self, request: Request) -> Response:
        return json_response({"telemetry": self.telemetry})

    async def set_telemetry(self, request: Request) -> Response:
        fields = Fields(await read_json(request, self.body))
        choice = fields.flag("telemetry")
        fields.check_unknown()
        self.telemetry = choice
        return json_response({"telemetry": choice})

    async def build_graph(self, request: Request) -> Response:
        name = request.path_params["app_name"]
        return json_response({"name": name, "root_agent": agent_json(self._root(request))})

    async def build_graph_image(self, request: Request) -> Response:
        root = self._root(request)
        node = request.query_params.get("node") or ""
        agent = find_node(root, node) if node else root
        if agent is None:
            raise HTTPError(404, f"Node not found: {node}")
        dark = request.query_params.get("dark_mode", "false").lower() in ("true", "1")
        return json_response({node: {"dotSrc": dot_source(agent, dark_mode=dark)}})

    async def session_trace(self, request: Request) -> Response:
        self._root(request)
        app_name, session_id = request.path_params["app_name"], request.path_params["session_id"]
        spans = self.traces.session_spans(session_id, app_name=app_name)
        return json_response([span.to_json() for span in spans if _complete(span)])

    async def event_trace(self, request: Request) -> Response:
        self._root(request)
        app_name = request.path_params["app_name"]
        span = self.traces.event_span(request.path_params["event_id"], app_name=app_name)
        if span is None:
            raise HTTPError(404, "Trace not found")
        return json_response(span.attributes)

    async def empty_list(self, request: Request) -> Response:
        self._root(request)
        return json_response([])

    async def builder(self, request: Request) -> Response:
        self._root(request)
        return Response(b"", media_type="text/plain")

    async def not_implemented(self, request: Request) -> Response:
        self._root(request)
        rest = request.path_params["rest"]
        what = "evaluations" if "eval" in rest or "metrics" in rest else f"{rest.split('/')[0]!r}"
        raise HTTPError(501, NOT_IMPLEMENTED.format(what=what))


def _complete(span: Any) -> bool:
    """Finished, and a model span names its event (ADK's UI refuses model spans without)."""
    if span.end_time is None:
        return False
    return not span.name.startswith("generate_content") or bool(
        span.attributes.get("gcp.vertex.agent.event_id")
    )
