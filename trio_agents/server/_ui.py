"""The dev UI: one static page (HTML, vanilla JS, CSS) over the HTTP API, no build step."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

__all__ = ["UI_PATH", "UI_PUBLIC_PATHS", "ui_routes"]

UI_PATH = "/dev-ui"
"""Where :func:`ui_routes` serves the page."""

UI_PUBLIC_PATHS = ("/", f"{UI_PATH}*")
"""The paths of the UI, to pass as ``create_app(public_paths=...)``: with a bearer token set,
the page still loads (it asks for the token, and only the API needs it)."""

UI_FILES = Path(__file__).resolve().parent / "ui"


def ui_routes() -> list[BaseRoute]:
    """The dev UI at ``/dev-ui/`` (``/`` redirects there), for ``create_app(extra_routes=...)``.

    ::

        app = create_app(agents, session_service=svc, extra_routes=ui_routes(),
                         public_paths=UI_PUBLIC_PATHS)
    """
    return [
        Route("/", _to_ui, methods=["GET"]),
        Mount(UI_PATH, app=StaticFiles(directory=UI_FILES, html=True), name="dev-ui"),
    ]


async def _to_ui(request: Request) -> Response:  # ruff: ignore[unused-async]
    return RedirectResponse(f"{UI_PATH}/", status_code=307)
