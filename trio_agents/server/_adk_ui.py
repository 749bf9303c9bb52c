"""ADK's own dev UI (the Angular app inside the google-adk wheel), served over this API.

Nothing of it is copied into trio_agents: :func:`adk_ui_routes` mounts the files of the installed
``google-adk`` package and adds the runtime configuration the app reads first.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .._errors import ConfigurationError
from ._http import json_response
from ._ui import UI_PATH

__all__ = ["adk_ui_files", "adk_ui_routes"]

RUNTIME_CONFIG = f"{UI_PATH}/assets/config/runtime-config.json"


def adk_ui_files() -> Path:
    """The folder of ADK's built dev UI in the installed google-adk.

    Raises:
        ConfigurationError: google-adk is not installed, or its wheel has no dev UI.
    """
    try:
        spec = importlib.util.find_spec("google.adk")
    except ModuleNotFoundError:  # no google namespace at all
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "ADK's dev UI comes with google-adk, which is not installed: "
            "pip install 'trio_agents[adk-ui]'"
        )
    browser = Path(next(iter(spec.submodule_search_locations))) / "cli" / "browser"
    if not (browser / "index.html").is_file():
        raise ConfigurationError(f"the installed google-adk has no dev UI at {str(browser)!r}")
    return browser


def adk_ui_routes() -> list[BaseRoute]:
    """ADK's dev UI at ``/dev-ui/`` (``/`` redirects there), for ``create_app(extra_routes=...)``.

    Pair it with ``dev_routes=True`` (the graph, traces and the other routes the UI calls) and
    ``public_paths=UI_PUBLIC_PATHS``.
    """
    files = adk_ui_files()
    return [
        Route("/", _to_ui, methods=["GET"]),
        Route(RUNTIME_CONFIG, _runtime_config, methods=["GET"]),
        Mount(UI_PATH, app=StaticFiles(directory=files, html=True), name="adk-dev-ui"),
    ]


async def _to_ui(request: Request) -> Response:  # ruff: ignore[unused-async]
    return RedirectResponse(f"{UI_PATH}/", status_code=307)


async def _runtime_config(request: Request) -> Response:  # ruff: ignore[unused-async]
    """Same origin for the API (an empty ``backendUrl``); no telemetry."""
    return json_response({"backendUrl": "", "telemetry": False})
