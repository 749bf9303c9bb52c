"""``ApiApp``: the Starlette app of the API, serving the routes of a run without its layers."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from ._http import RefuseNul

__all__: list[str] = []  # create_app returns it as a Starlette

Endpoint = Callable[[Request], Awaitable[Response]]


class ApiApp(Starlette):
    """Starlette, with the routes every run takes (creating a session, starting a run) served
    directly.

    Per request, Starlette's stack (its error middleware, the app's middleware, its exception
    middleware, the router, the route's wrapper) adds a dozen calls and three wrappers around
    every ``send``. For the ``direct`` routes this app does in one step what the stack does: the
    endpoint's response is sent; an exception the app has a handler for is answered by it; any
    other failure is answered 500 ``Internal Server Error`` (unless the response has started) and
    raised again. Only while the app's middleware is its own ``RefuseNul`` alone and it is not
    in debug mode: with auth, CORS, middleware added later or ``debug``, every request goes
    through the stack.
    """

    def __init__(self, *, direct: Sequence[BaseRoute], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._direct: list[tuple[re.Pattern[str], frozenset[str], Endpoint]] = []
        for route in direct:
            assert isinstance(route, Route)
            assert route.methods
            self._direct.append((route.path_regex, frozenset(route.methods), route.endpoint))
        self._bypass: bool | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._bypassing():
            endpoint = self._endpoint(scope)
            if endpoint is not None:
                await self._serve(endpoint, scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    def _bypassing(self) -> bool:
        if self._bypass is None:  # decided on the first request: middleware is added before
            mine: list[Any] = [m.cls for m in self.user_middleware]
            self._bypass = mine == [RefuseNul] and not self.debug
        return self._bypass

    def _endpoint(self, scope: Scope) -> Endpoint | None:
        """The direct route's endpoint for ``scope`` (its path parameters put there), or None."""
        path = scope["path"]
        if scope.get("root_path") or "\x00" in path:
            return None
        for regex, methods, endpoint in self._direct:
            match: re.Match[str] | None = regex.match(path)
            if match is not None and scope["method"] in methods:
                scope["app"] = self
                scope["path_params"] = match.groupdict()
                return endpoint
        return None

    async def _serve(self, endpoint: Endpoint, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        request = Request(scope, receive, send)
        try:
            try:
                response = await endpoint(request)
                await response(scope, receive, sending)
            except Exception as exc:
                handled = self._handled(request, exc)
                if started:
                    message = "Caught handled exception, but response already started."
                    raise RuntimeError(message) from exc
                await handled(scope, receive, sending)
        except Exception:
            if not started:
                await PlainTextResponse("Internal Server Error", 500)(scope, receive, send)
            raise

    def _handled(self, request: Request, exc: Exception) -> Response:
        """The response of the app's handler for ``exc`` (which is raised again without one)."""
        for cls in type(exc).__mro__:
            handler = self.exception_handlers.get(cls)
            if handler is not None:
                response = handler(request, exc)
                assert isinstance(response, Response)
                return response
        raise exc
