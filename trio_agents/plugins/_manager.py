"""Ordered plugin dispatch: registration order, first non-None wins, errors named."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._content import Content
from .._errors import ConfigurationError, PluginError
from .._events import Event
from ._base import BasePlugin

if TYPE_CHECKING:
    from .._context import CallbackContext, InvocationContext
    from ..agents._base import BaseAgent
    from ..models._base import LlmRequest, LlmResponse
    from ..tools._base import BaseTool, ToolContext

__all__ = ["PluginManager"]

T = TypeVar("T")

logger = logging.getLogger("trio_agents.plugins")


class PluginManager:
    """Runs plugin hooks in registration order.

    For intervening hooks the first non-None result wins and later plugins are skipped. An
    exception inside a hook becomes :class:`~trio_agents.PluginError` naming the plugin and the
    hook, chained to the cause; so does a result of the wrong type from ``on_user_message`` or
    ``on_event``. Notification hooks (errors, after-run, close) call every plugin and then raise
    the first failure (later ones are attached as notes); the Runner only adds them as notes to an
    error that is already propagating, so they never mask it.
    """

    def __init__(self, plugins: Sequence[BasePlugin] = ()) -> None:
        names: set[str] = set()
        for plugin in plugins:
            if not isinstance(plugin, BasePlugin):
                raise ConfigurationError(f"{plugin!r} is not a BasePlugin")
            if plugin.name in names:
                raise ConfigurationError(f"duplicate plugin name {plugin.name!r}")
            names.add(plugin.name)
        self.plugins: tuple[BasePlugin, ...] = tuple(plugins)
        self.sees_events = any(_overrides(plugin, "on_event_callback") for plugin in plugins)
        """Whether some plugin has an ``on_event_callback`` of its own (else events need none)."""

    def __bool__(self) -> bool:
        return bool(self.plugins)

    async def first(
        self,
        hook: str,
        call: Callable[[BasePlugin], Awaitable[T | None]],
        expect: type | tuple[type, ...] | None = None,
    ) -> T | None:
        """Call ``call(plugin)`` for each plugin until one returns non-None.

        With ``expect``, a non-None result that is not an instance of it is the plugin's fault:
        :class:`~trio_agents.PluginError` chained to a ``TypeError``.
        """
        for plugin in self.plugins:
            try:
                result = await call(plugin)
            except Exception as exc:
                raise PluginError(plugin=plugin.name, hook=hook) from exc
            if result is not None:
                if expect is not None and not isinstance(result, expect):
                    wrong = TypeError(
                        f"{hook} must return {_names(expect)} or None, got {type(result).__name__}"
                    )
                    raise PluginError(plugin=plugin.name, hook=hook) from wrong
                return result
        return None

    async def notify(self, hook: str, call: Callable[[BasePlugin], Awaitable[object]]) -> None:
        """Call ``call(plugin)`` for every plugin; raise the first failure after all ran."""
        failures: list[PluginError] = []
        for plugin in self.plugins:
            try:
                await call(plugin)
            except Exception as exc:
                failure = PluginError(plugin=plugin.name, hook=hook)
                failure.__cause__ = exc
                failures.append(failure)
        _raise_first(failures)

    # -- typed entry points used by the runtime ----------------------------------------------------

    async def on_user_message(self, ctx: InvocationContext, message: Content) -> Content | None:
        """The first replacement of the user message (a ``Content``), or None."""
        return await self.first(
            "on_user_message_callback",
            lambda p: p.on_user_message_callback(invocation_context=ctx, user_message=message),
            Content,
        )

    async def before_run(self, ctx: InvocationContext) -> Content | None:
        """The first non-None result; anything but a ``Content`` is ignored (R-PLG-7)."""
        result = await self.first(
            "before_run_callback", lambda p: p.before_run_callback(invocation_context=ctx)
        )
        return result if isinstance(result, Content) else None

    async def on_event(self, ctx: InvocationContext, event: Event) -> Event | None:
        """The first replacement of ``event`` (an ``Event``), or None."""
        return await self.first(
            "on_event_callback",
            lambda p: p.on_event_callback(invocation_context=ctx, event=event),
            Event,
        )

    async def after_run(self, ctx: InvocationContext) -> None:
        """Notify every plugin that the run ended without an error."""
        await self.notify(
            "after_run_callback", lambda p: p.after_run_callback(invocation_context=ctx)
        )

    async def on_run_error(self, ctx: InvocationContext, error: Exception) -> None:
        """Notify every plugin that the run failed with ``error``."""
        await self.notify(
            "on_run_error_callback",
            lambda p: p.on_run_error_callback(invocation_context=ctx, error=error),
        )

    async def before_agent(self, agent: BaseAgent, cc: CallbackContext) -> Content | None:
        """The first answer that replaces running ``agent``, or None."""
        return await self.first(
            "before_agent_callback",
            lambda p: p.before_agent_callback(agent=agent, callback_context=cc),
        )

    async def after_agent(self, agent: BaseAgent, cc: CallbackContext) -> Content | None:
        """The first extra answer after ``agent`` ran, or None."""
        return await self.first(
            "after_agent_callback",
            lambda p: p.after_agent_callback(agent=agent, callback_context=cc),
        )

    async def on_agent_error(self, agent: BaseAgent, cc: CallbackContext, error: Exception) -> None:
        """Notify every plugin that ``agent`` raised ``error``."""
        await self.notify(
            "on_agent_error_callback",
            lambda p: p.on_agent_error_callback(agent=agent, callback_context=cc, error=error),
        )

    async def before_model(self, cc: CallbackContext, request: LlmRequest) -> LlmResponse | None:
        """The first answer that replaces calling the model, or None."""
        return await self.first(
            "before_model_callback",
            lambda p: p.before_model_callback(callback_context=cc, llm_request=request),
        )

    async def after_model(self, cc: CallbackContext, response: LlmResponse) -> LlmResponse | None:
        """The first replacement of the model's ``response``, or None."""
        return await self.first(
            "after_model_callback",
            lambda p: p.after_model_callback(callback_context=cc, llm_response=response),
        )

    async def on_model_error(
        self, cc: CallbackContext, request: LlmRequest, error: Exception
    ) -> LlmResponse | None:
        """The first answer that recovers from the model's ``error``, or None."""
        return await self.first(
            "on_model_error_callback",
            lambda p: p.on_model_error_callback(
                callback_context=cc, llm_request=request, error=error
            ),
        )

    async def before_tool(
        self, tool: BaseTool, args: dict[str, Any], tc: ToolContext
    ) -> dict[str, Any] | None:
        """The first result that replaces running ``tool``, or None."""
        return await self.first(
            "before_tool_callback",
            lambda p: p.before_tool_callback(tool=tool, tool_args=args, tool_context=tc),
        )

    async def after_tool(
        self, tool: BaseTool, args: dict[str, Any], tc: ToolContext, result: Any
    ) -> dict[str, Any] | None:
        """The first replacement of the tool's ``result``, or None."""
        return await self.first(
            "after_tool_callback",
            lambda p: p.after_tool_callback(
                tool=tool, tool_args=args, tool_context=tc, result=result
            ),
        )

    async def on_tool_error(
        self, tool: BaseTool, args: dict[str, Any], tc: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        """The first result that recovers from the tool's ``error``, or None."""
        return await self.first(
            "on_tool_error_callback",
            lambda p: p.on_tool_error_callback(
                tool=tool, tool_args=args, tool_context=tc, error=error
            ),
        )

    async def close(self, *, per_plugin_timeout: float | None = None) -> None:
        """Close every plugin, each within ``per_plugin_timeout`` seconds; raise the first failure.

        A plugin whose ``close`` is still running after ``per_plugin_timeout`` is cancelled,
        logged and abandoned; the next plugin is closed all the same.
        """
        timeout = per_plugin_timeout
        failures: list[PluginError] = []
        for plugin in self.plugins:
            with trio.move_on_after(math.inf if timeout is None else timeout) as scope:
                try:
                    await plugin.close()
                except Exception as exc:
                    failure = PluginError(plugin=plugin.name, hook="close")
                    failure.__cause__ = exc
                    failures.append(failure)
            if scope.cancelled_caught:
                logger.warning(
                    "plugin %r did not close within %s seconds; abandoned", plugin.name, timeout
                )
        _raise_first(failures)


def _raise_first(failures: list[PluginError]) -> None:
    if not failures:
        return
    first = failures[0]
    for other in failures[1:]:
        first.add_note(f"also: {other} ({other.__cause__!r})")
    raise first


def _names(expect: type | tuple[type, ...]) -> str:
    types = expect if isinstance(expect, tuple) else (expect,)
    return " or ".join(t.__name__ for t in types)


def _overrides(plugin: BasePlugin, hook: str) -> bool:
    """Whether ``plugin``'s class replaces :class:`BasePlugin`'s ``hook`` (a no-op there)."""
    return getattr(type(plugin), hook) is not getattr(BasePlugin, hook)
