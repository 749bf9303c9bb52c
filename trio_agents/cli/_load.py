"""Loading agents from a ``TARGET``: ``module:attribute`` or a directory of agent packages."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

from .._errors import ConfigurationError
from ..agents import BaseAgent

__all__ = ["load_agent", "load_agents"]


def load_agent(target: str) -> BaseAgent:
    """Import ``"package.module:attribute"`` (attribute defaults to ``root_agent``) as an agent.

    For a package without the attribute, its ``agent`` module is tried too (ADK's layout).
    """
    module_name, _, attribute = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r} for {target!r}: {exc}") from exc
    agent = getattr(module, attribute or "root_agent", None)
    if agent is None and hasattr(module, "__path__"):  # a package: ADK keeps it in .agent
        agent = _package_agent(module_name, attribute or "root_agent")
    if not isinstance(agent, BaseAgent):
        raise ConfigurationError(f"{target!r} is not an agent (got {type(agent).__name__})")
    return agent


def load_agents(target: str) -> dict[str, BaseAgent]:
    """The apps of ``target``, by app name.

    A directory holds one package per app (``<dir>/<app>/__init__.py`` or ``agent.py``
    exposing ``root_agent``), as ADK lays them out; anything else is ``module:attribute`` and
    names one app after its root agent.
    """
    path = Path(target)
    if ":" not in target and path.is_dir():
        return _load_directory(path)
    agent = load_agent(target)
    return {agent.name: agent}


def _load_directory(root: Path) -> dict[str, BaseAgent]:
    apps: dict[str, BaseAgent] = {}
    with _on_path(root.resolve()):
        for package in sorted(p for p in root.iterdir() if (p / "__init__.py").is_file()):
            agent = _package_agent(package.name)
            if agent is not None:
                apps[package.name] = agent
    if not apps:
        raise ConfigurationError(f"no agent packages with a root_agent under {str(root)!r}")
    return apps


def _package_agent(name: str, attribute: str = "root_agent") -> BaseAgent | None:
    for module_name in (name, f"{name}.agent"):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        agent = getattr(module, attribute, None)
        if isinstance(agent, BaseAgent):
            return agent
    return None


@contextlib.contextmanager
def _on_path(directory: Path) -> Iterator[None]:
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(directory))
