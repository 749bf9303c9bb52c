"""Plugins: global callbacks around runs, agents, models, tools and events.

Shipped plugins: :class:`LoggingPlugin`, :class:`MetricsPlugin`, :class:`ToolPolicyPlugin`,
:class:`ResponseCachePlugin` and :class:`TracingPlugin` (needs the ``otel`` extra).
"""

from __future__ import annotations

from .._exports import publish as _publish
from ..models._request_key import request_key as request_key
from ._base import BasePlugin as BasePlugin
from ._cache import CacheStats as CacheStats, ResponseCachePlugin as ResponseCachePlugin
from ._logging import LoggingPlugin as LoggingPlugin
from ._manager import PluginManager as PluginManager
from ._metrics import (
    DEFAULT_BUCKETS as DEFAULT_BUCKETS,
    AgentKey as AgentKey,
    ErrorKey as ErrorKey,
    Histogram as Histogram,
    MetricsPlugin as MetricsPlugin,
    MetricsSnapshot as MetricsSnapshot,
    ModelKey as ModelKey,
    TokenKey as TokenKey,
    ToolKey as ToolKey,
    render_prometheus as render_prometheus,
)
from ._policy import (
    Denial as Denial,
    ToolPolicyPlugin as ToolPolicyPlugin,
    ToolRule as ToolRule,
    allow as allow,
    deny as deny,
)
from ._tracing import TracingPlugin as TracingPlugin

__all__ = [
    "AgentKey",
    "BasePlugin",
    "CacheStats",
    "DEFAULT_BUCKETS",
    "Denial",
    "ErrorKey",
    "Histogram",
    "LoggingPlugin",
    "MetricsPlugin",
    "MetricsSnapshot",
    "ModelKey",
    "PluginManager",
    "ResponseCachePlugin",
    "TokenKey",
    "ToolKey",
    "ToolPolicyPlugin",
    "ToolRule",
    "TracingPlugin",
    "allow",
    "deny",
    "render_prometheus",
    "request_key",
]

_publish(__name__, globals(), __all__)
