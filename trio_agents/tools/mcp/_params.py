"""How to reach an MCP server: the connection parameters google-adk users already write."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs
from mcp import StdioServerParameters

from ..._errors import ConfigurationError

__all__ = [
    "ConnectionParams",
    "SseConnectionParams",
    "StdioConnectionParams",
    "StreamableHTTPConnectionParams",
    "checked_params",
    "server_label",
]


def _positive(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(
            f"{type(instance).__name__}: {attribute.name} must be a positive number of "
            f"seconds, got {value!r}"
        )


def _server_params(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, StdioServerParameters):
        raise ConfigurationError(
            f"StdioConnectionParams: server_params must be an mcp StdioServerParameters, "
            f"got {value!r}"
        )
    if not value.command.strip():
        raise ConfigurationError("StdioConnectionParams: the server command is empty")


def _http_url(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    name = type(instance).__name__
    if not isinstance(value, str):
        raise ConfigurationError(f"{name}: url must be a string, got {value!r}")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(f"{name}: url must be an http(s) URL, got {value!r}")


def _headers(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigurationError(
            f"{type(instance).__name__}: headers must map names to strings, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class StdioConnectionParams:
    """An MCP server run as a child process, spoken to over its stdin and stdout.

    ``timeout`` bounds the handshake and every request to the server, in seconds.
    """

    server_params: StdioServerParameters = attrs.field(validator=_server_params)
    timeout: float = attrs.field(default=5.0, validator=_positive)


@attrs.frozen(kw_only=True)
class StreamableHTTPConnectionParams:
    """An MCP server at an http(s) URL, over the streamable HTTP transport.

    ``timeout`` bounds the handshake and every request; ``sse_read_timeout`` how long a
    response stream may stay silent; ``terminate_on_close`` ends the server's session on close.
    """

    url: str = attrs.field(validator=_http_url)
    headers: Mapping[str, str] | None = attrs.field(default=None, validator=_headers)
    timeout: float = attrs.field(default=5.0, validator=_positive)
    sse_read_timeout: float = attrs.field(default=300.0, validator=_positive)
    terminate_on_close: bool = True


@attrs.frozen(kw_only=True)
class SseConnectionParams:
    """An MCP server at an http(s) URL, over the (older) HTTP+SSE transport."""

    url: str = attrs.field(validator=_http_url)
    headers: Mapping[str, str] | None = attrs.field(default=None, validator=_headers)
    timeout: float = attrs.field(default=5.0, validator=_positive)
    sse_read_timeout: float = attrs.field(default=300.0, validator=_positive)


ConnectionParams = StdioConnectionParams | StreamableHTTPConnectionParams | SseConnectionParams


def checked_params(params: object) -> ConnectionParams:
    """``params`` as connection parameters (bare ``StdioServerParameters`` are wrapped).

    Raises:
        ConfigurationError: anything else.
    """
    if isinstance(params, StdioServerParameters):
        return StdioConnectionParams(server_params=params)
    if isinstance(
        params, StdioConnectionParams | StreamableHTTPConnectionParams | SseConnectionParams
    ):
        return params
    raise ConfigurationError(
        "McpToolset: connection_params must be StdioConnectionParams, "
        f"StreamableHTTPConnectionParams or SseConnectionParams, got {params!r}"
    )


def server_label(params: ConnectionParams) -> str:
    """How errors name the server: its command line, or its URL."""
    if isinstance(params, StdioConnectionParams):
        server = params.server_params
        return shlex.join([server.command, *server.args])
    return params.url
