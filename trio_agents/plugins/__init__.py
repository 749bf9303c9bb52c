"""Plugins: global callbacks around runs, agents, models, tools and events."""

from __future__ import annotations

from ._base import BasePlugin as BasePlugin
from ._manager import PluginManager as PluginManager

__all__ = ["BasePlugin", "PluginManager"]
