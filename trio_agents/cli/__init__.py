"""The ``trio-agents`` command line: ``demo``, ``run``, ``api-server`` and ``web``.

Helpers here are public for tools that embed the same behaviour: :func:`load_apps` (or
:func:`load_agents`, their root agents) reads a ``TARGET`` (``module[:attribute]``, a ``.py``
file, one agent package or a folder of them, as ADK projects are laid out) and
:func:`open_services` turns ``memory://``, ``sqlite:///…`` and ``postgresql://…`` URIs into
services.
"""

from __future__ import annotations

from .._exports import publish as _publish
from ._chat import ChatPrinter as ChatPrinter, chat as chat
from ._load import load_agent as load_agent, load_agents as load_agents, load_apps as load_apps
from ._services import Services as Services, open_services as open_services

__all__ = [
    "ChatPrinter",
    "Services",
    "chat",
    "load_agent",
    "load_agents",
    "load_apps",
    "open_services",
]

_publish(__name__, globals(), __all__)
