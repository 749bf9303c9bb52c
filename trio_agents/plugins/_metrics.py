"""MetricsPlugin: counts and latency histograms of invocations, agents, models, tools and tokens.

Everything is measured with ``trio.current_time()``, so tests under a mock clock see exact
latencies. State is kept per invocation id (parallel branches and concurrent invocations
interleave their hooks) and dropped when the invocation ends: a model or tool call still open at
that point was cancelled (the consumer left, ``cancel()``, a failing sibling) and is counted so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import trio

from .._errors import ConfigurationError
from ._base import BasePlugin

if TYPE_CHECKING:
    from .._context import CallbackContext, InvocationContext
    from .._events import Event
    from ..agents._base import BaseAgent
    from ..models._base import LlmRequest, LlmResponse
    from ..tools._base import BaseTool, ToolContext

__all__ = [
    "DEFAULT_BUCKETS",
    "AgentKey",
    "ErrorKey",
    "Histogram",
    "MetricsPlugin",
    "MetricsSnapshot",
    "ModelKey",
    "TokenKey",
    "ToolKey",
    "render_prometheus",
]

DEFAULT_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)
"""Upper bounds (seconds) of the latency buckets; a ``+Inf`` bucket is always added."""

OK = "ok"
ERROR = "error"
CANCELLED = "cancelled"
DENIED = "denied"


class AgentKey(NamedTuple):
    agent: str
    status: str


class ModelKey(NamedTuple):
    agent: str
    model: str
    status: str


class ToolKey(NamedTuple):
    agent: str
    tool: str
    status: str


class ErrorKey(NamedTuple):
    where: str
    """``"run"``, ``"agent"``, ``"model"`` or ``"tool"``."""
    name: str
    """The agent (run, agent), model or tool that failed."""
    error_type: str


class TokenKey(NamedTuple):
    agent: str
    model: str
    kind: str
    """``"prompt"``, ``"completion"``, ``"total"``, ``"cached"`` or ``"thoughts"``."""


@attrs.frozen(kw_only=True)
class Histogram:
    """Observations of one latency, in seconds."""

    bounds: tuple[float, ...]
    """Bucket upper bounds, ascending; the last bucket (``+Inf``) is implicit."""
    counts: tuple[int, ...]
    """Observations per bucket (not cumulative): ``len(bounds) + 1`` entries."""
    count: int
    sum: float

    def cumulative(self) -> tuple[int, ...]:
        """Observations at or below each bound, then the total (Prometheus ``le`` buckets)."""
        out: list[int] = []
        running = 0
        for n in self.counts:
            running += n
            out.append(running)
        return tuple(out)


@attrs.frozen(kw_only=True)
class MetricsSnapshot:
    """A copy of every metric at one moment; plain data, safe to keep."""

    invocations: Mapping[str, int]
    """Finished invocations by status: ``ok``, ``cancelled`` or ``error``."""
    invocation_seconds: Histogram
    agent_runs: Mapping[AgentKey, int]
    agent_seconds: Mapping[str, Histogram]
    """By agent name."""
    model_calls: Mapping[ModelKey, int]
    model_seconds: Mapping[tuple[str, str], Histogram]
    """By ``(agent, model)``."""
    tool_calls: Mapping[ToolKey, int]
    """By agent, tool and status: ``ok``, ``error``, ``cancelled`` or ``denied`` (policy)."""
    tool_seconds: Mapping[tuple[str, str], Histogram]
    """By ``(agent, tool)``."""
    errors: Mapping[ErrorKey, int]
    tokens: Mapping[TokenKey, int]
    in_flight: Mapping[str, int]
    """What is open right now: ``invocations``, ``agents``, ``models``, ``tools``."""


class _Hist:
    __slots__ = ("bounds", "count", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.count = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        index = len(self.bounds)
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                index = i
                break
        self.counts[index] += 1
        self.count += 1
        self.sum += value

    def frozen(self) -> Histogram:
        return Histogram(
            bounds=self.bounds, counts=tuple(self.counts), count=self.count, sum=self.sum
        )


@attrs.define
class _Call:
    """An open model or tool call; ``owner`` keeps the context object alive while keyed by id."""

    owner: object
    agent: str
    name: str
    start: float
    failed_at: float | None = None
    """When an error hook saw it fail; it closes with status ``error`` at that time."""


@attrs.define
class _Live:
    """What one invocation has open."""

    start: float
    agents: dict[tuple[str | None, str], list[float]] = attrs.field(factory=dict)
    models: dict[int, _Call] = attrs.field(factory=dict)
    tools: dict[int, _Call] = attrs.field(factory=dict)


_TOKEN_FIELDS = (
    ("prompt", "prompt_token_count"),
    ("completion", "candidates_token_count"),
    ("total", "total_token_count"),
    ("cached", "cached_content_token_count"),
    ("thoughts", "thoughts_token_count"),
)


class MetricsPlugin(BasePlugin):
    """Counts and latency histograms; read them with :meth:`snapshot` or :meth:`render_prometheus`.

    The plugin only observes (every hook returns None). Register it **after** plugins that
    short-circuit a hook (a response cache, a tool policy): calls they answer never reach the model
    or the tool, and are then not counted as model calls (a denied tool call is counted with status
    ``denied``). One instance may serve several runners.
    """

    def __init__(
        self,
        name: str = "metrics",
        *,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
        namespace: str = "trio_agents",
    ) -> None:
        super().__init__(name)
        bounds = tuple(float(b) for b in buckets)
        if not bounds or list(bounds) != sorted(set(bounds)) or not all(map(math.isfinite, bounds)):
            raise ConfigurationError(
                f"metrics buckets must be finite, strictly increasing numbers, got {buckets!r}"
            )
        self.buckets = bounds
        self.namespace = namespace
        self._live: dict[str, _Live] = {}
        self._invocations: dict[str, int] = {}
        self._invocation_seconds = _Hist(bounds)
        self._agent_runs: dict[AgentKey, int] = {}
        self._agent_seconds: dict[str, _Hist] = {}
        self._model_calls: dict[ModelKey, int] = {}
        self._model_seconds: dict[tuple[str, str], _Hist] = {}
        self._tool_calls: dict[ToolKey, int] = {}
        self._tool_seconds: dict[tuple[str, str], _Hist] = {}
        self._errors: dict[ErrorKey, int] = {}
        self._tokens: dict[TokenKey, int] = {}

    # -- reading -----------------------------------------------------------------------------------

    def snapshot(self) -> MetricsSnapshot:
        """A consistent copy of every metric (no checkpoint: nothing changes while it is taken)."""
        live = self._live.values()
        return MetricsSnapshot(
            invocations=dict(self._invocations),
            invocation_seconds=self._invocation_seconds.frozen(),
            agent_runs=dict(self._agent_runs),
            agent_seconds={k: h.frozen() for k, h in self._agent_seconds.items()},
            model_calls=dict(self._model_calls),
            model_seconds={k: h.frozen() for k, h in self._model_seconds.items()},
            tool_calls=dict(self._tool_calls),
            tool_seconds={k: h.frozen() for k, h in self._tool_seconds.items()},
            errors=dict(self._errors),
            tokens=dict(self._tokens),
            in_flight={
                "invocations": len(self._live),
                "agents": sum(len(s) for inv in live for s in inv.agents.values()),
                "models": sum(len(inv.models) for inv in live),
                "tools": sum(len(inv.tools) for inv in live),
            },
        )

    def render_prometheus(self) -> str:
        """The metrics in the Prometheus text exposition format (version 0.0.4)."""
        return render_prometheus(self.snapshot(), namespace=self.namespace)

    # -- bookkeeping -------------------------------------------------------------------------------

    def _inv(self, invocation_id: str) -> _Live:
        live = self._live.get(invocation_id)
        if live is None:
            live = self._live[invocation_id] = _Live(start=trio.current_time())
        return live

    def _finish(self, invocation_id: str, status: str, *, interrupted: bool) -> None:
        live = self._live.pop(invocation_id, None)
        now = trio.current_time()
        if live is None:
            live = _Live(start=now)
        leftover = CANCELLED if interrupted else OK  # an agent that ended its invocation early
        for (_, agent), starts in live.agents.items():
            for start in starts:
                self._end_agent(agent, leftover, now - start)
        for call in live.models.values():
            self._end_model(call, now)
        for call in live.tools.values():
            self._end_tool(call, now)
        _bump(self._invocations, status)
        self._invocation_seconds.observe(now - live.start)

    def _end_agent(self, agent: str, status: str, seconds: float) -> None:
        _bump(self._agent_runs, AgentKey(agent, status))
        _hist(self._agent_seconds, agent, self.buckets).observe(seconds)

    def _end_model(self, call: _Call, now: float, status: str = CANCELLED) -> None:
        """Count a model call; one that an error hook saw fail counts as an error."""
        if call.failed_at is not None:
            status, now = ERROR, call.failed_at
        _bump(self._model_calls, ModelKey(call.agent, call.name, status))
        key = (call.agent, call.name)
        _hist(self._model_seconds, key, self.buckets).observe(now - call.start)

    def _end_tool(self, call: _Call, now: float, status: str = CANCELLED) -> None:
        """Count a tool call; one that an error hook saw fail counts as an error."""
        if call.failed_at is not None:
            status, now = ERROR, call.failed_at
        _bump(self._tool_calls, ToolKey(call.agent, call.name, status))
        key = (call.agent, call.name)
        _hist(self._tool_seconds, key, self.buckets).observe(now - call.start)

    def _error(self, where: str, name: str, error: BaseException) -> None:
        _bump(self._errors, ErrorKey(where, name, type(error).__name__))

    # -- run hooks ---------------------------------------------------------------------------------

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> None:
        self._inv(invocation_context.invocation_id)

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> None:
        self._inv(invocation_context.invocation_id)

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        live = self._live.get(invocation_context.invocation_id)
        open_calls = live is not None and bool(live.models or live.tools)
        interrupted = _interrupted(invocation_context) or open_calls
        status = CANCELLED if interrupted else OK
        self._finish(invocation_context.invocation_id, status, interrupted=interrupted)

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        self._error("run", invocation_context.agent.name, error)
        self._finish(invocation_context.invocation_id, ERROR, interrupted=True)

    # -- agent hooks -------------------------------------------------------------------------------

    async def before_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> None:
        live = self._inv(callback_context.invocation_id)
        key = (callback_context.branch, agent.name)
        live.agents.setdefault(key, []).append(trio.current_time())

    async def after_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> None:
        self._close_agent(callback_context, agent, CANCELLED if callback_context.cancelled else OK)

    async def on_agent_error_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext, error: Exception
    ) -> None:
        self._error("agent", agent.name, error)
        self._close_agent(callback_context, agent, ERROR)

    def _close_agent(self, cc: CallbackContext, agent: BaseAgent, status: str) -> None:
        live = self._live.get(cc.invocation_id)
        if live is None:
            return
        key = (cc.branch, agent.name)
        starts = live.agents.get(key)
        if not starts:
            return
        start = starts.pop()
        if not starts:
            del live.agents[key]
        self._end_agent(agent.name, status, trio.current_time() - start)

    # -- model hooks -------------------------------------------------------------------------------

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        live = self._inv(callback_context.invocation_id)
        model = getattr(llm_request, "model", None) or "unknown"
        live.models[id(callback_context)] = _Call(
            callback_context, callback_context.agent_name, model, trio.current_time()
        )

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> None:
        if getattr(llm_response, "partial", None):
            return
        live = self._live.get(callback_context.invocation_id)
        call = live.models.pop(id(callback_context), None) if live is not None else None
        model = "unknown"
        if call is not None:
            model = call.name
            self._end_model(call, trio.current_time(), OK)
        usage = getattr(llm_response, "usage_metadata", None)
        if usage is not None:
            agent = callback_context.agent_name
            for kind, field in _TOKEN_FIELDS:
                value = getattr(usage, field, None)
                if value:
                    _bump(self._tokens, TokenKey(agent, model, kind), value)

    async def on_model_error_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest, error: Exception
    ) -> None:
        live = self._live.get(callback_context.invocation_id)
        call = live.models.get(id(callback_context)) if live is not None else None
        if call is not None:
            call.failed_at = trio.current_time()  # closed by after_model or when the run ends
        model = call.name if call is not None else getattr(llm_request, "model", None)
        self._error("model", model or "unknown", error)

    # -- tool hooks --------------------------------------------------------------------------------

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> None:
        live = self._inv(tool_context.invocation_id)
        live.tools[id(tool_context)] = _Call(
            tool_context, tool_context.agent_name, tool.name, trio.current_time()
        )

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: Any
    ) -> None:
        live = self._live.get(tool_context.invocation_id)
        call = live.tools.pop(id(tool_context), None) if live is not None else None
        status = DENIED if isinstance(result, Mapping) and "denied_by" in result else OK
        if call is None:
            # before_tool was answered by an earlier plugin (e.g. a policy): no latency.
            _bump(self._tool_calls, ToolKey(tool_context.agent_name, tool.name, status))
            return
        self._end_tool(call, trio.current_time(), status)

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> None:
        self._error("tool", tool.name, error)
        live = self._live.get(tool_context.invocation_id)
        call = live.tools.get(id(tool_context)) if live is not None else None
        if call is not None:
            call.failed_at = trio.current_time()  # closed by after_tool or when the run ends


def _interrupted(ctx: InvocationContext) -> bool:
    """Whether the invocation's run was cancelled before it finished."""
    return bool(getattr(ctx, "run_cancelled", False))


def _bump(table: dict[Any, int], key: Any, by: int = 1) -> None:
    table[key] = table.get(key, 0) + by


def _hist(table: dict[Any, _Hist], key: Any, bounds: tuple[float, ...]) -> _Hist:
    hist = table.get(key)
    if hist is None:
        hist = table[key] = _Hist(bounds)
    return hist


# -- Prometheus text format ------------------------------------------------------------------------


def render_prometheus(snapshot: MetricsSnapshot, *, namespace: str = "trio_agents") -> str:
    """``snapshot`` in the Prometheus text exposition format (version 0.0.4)."""
    out: list[str] = []
    ns = namespace

    def header(name: str, kind: str, text: str) -> None:
        out.append(f"# HELP {ns}_{name} {text}")
        out.append(f"# TYPE {ns}_{name} {kind}")

    def counter(name: str, text: str, labels: Sequence[str], table: Mapping[Any, int]) -> None:
        header(name, "counter", text)
        for key in sorted(table, key=_sort_key):
            values = key if isinstance(key, tuple) else (key,)
            out.append(f"{ns}_{name}{_labels(zip(labels, values, strict=True))} {table[key]}")

    def histograms(
        name: str, text: str, labels: Sequence[str], table: Mapping[Any, Histogram]
    ) -> None:
        header(name, "histogram", text)
        for key in sorted(table, key=_sort_key):
            values = key if isinstance(key, tuple) else (key,)
            _histogram_lines(
                out, f"{ns}_{name}", list(zip(labels, values, strict=True)), table[key]
            )

    counter(
        "invocations_total", "Finished invocations by status.", ["status"], snapshot.invocations
    )
    header("invocation_duration_seconds", "histogram", "Invocation latency in seconds.")
    _histogram_lines(out, f"{ns}_invocation_duration_seconds", [], snapshot.invocation_seconds)
    counter(
        "agent_runs_total", "Agent runs by agent and status.", AgentKey._fields, snapshot.agent_runs
    )
    histograms(
        "agent_run_duration_seconds",
        "Agent run latency in seconds.",
        ["agent"],
        snapshot.agent_seconds,
    )
    counter(
        "model_calls_total",
        "Model calls by agent, model and status.",
        ModelKey._fields,
        snapshot.model_calls,
    )
    histograms(
        "model_call_duration_seconds",
        "Model call latency in seconds.",
        ["agent", "model"],
        snapshot.model_seconds,
    )
    counter(
        "tool_calls_total",
        "Tool calls by agent, tool and status.",
        ToolKey._fields,
        snapshot.tool_calls,
    )
    histograms(
        "tool_call_duration_seconds",
        "Tool call latency in seconds.",
        ["agent", "tool"],
        snapshot.tool_seconds,
    )
    counter("errors_total", "Errors by where they happened.", ErrorKey._fields, snapshot.errors)
    counter("tokens_total", "Tokens reported by models.", TokenKey._fields, snapshot.tokens)
    header("in_flight", "gauge", "Invocations, agent runs, model and tool calls now open.")
    for kind in sorted(snapshot.in_flight):
        out.append(f"{ns}_in_flight{_labels([('kind', kind)])} {snapshot.in_flight[kind]}")
    return "\n".join(out) + "\n"


def _histogram_lines(
    out: list[str], name: str, labels: list[tuple[str, str]], hist: Histogram
) -> None:
    bounds = [*(_number(b) for b in hist.bounds), "+Inf"]
    for le, count in zip(bounds, hist.cumulative(), strict=True):
        out.append(f"{name}_bucket{_labels([*labels, ('le', le)])} {count}")
    out.append(f"{name}_sum{_labels(labels)} {_number(hist.sum)}")
    out.append(f"{name}_count{_labels(labels)} {hist.count}")


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    body = ",".join(f'{name}="{_escape(str(value))}"' for name, value in pairs)
    return "{" + body + "}" if body else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return repr(float(value))


def _sort_key(key: Any) -> tuple[str, ...]:
    return tuple(map(str, key)) if isinstance(key, tuple) else (str(key),)
