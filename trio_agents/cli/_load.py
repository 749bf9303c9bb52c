"""Loading apps from a ``TARGET``, the way ADK users lay out their projects.

A target is one of:

- ``module`` or ``module:attribute``, imported with the current directory first on ``sys.path``
  (as ``python -m`` does);
- ``path/to/file.py`` or ``path/to/file.py:attribute``, imported from that file;
- ``path/to/package``: one agent package (``__init__.py`` or ``agent.py`` exposing the app),
  as ``adk run`` takes it;
- ``path/to/apps``: a directory of such packages, one app each, as ``adk web`` takes it.

Without an attribute, a module's ``app`` (an object with ``name`` and ``root_agent``, ADK 2.x
style) is used, else its ``root_agent``. Every failure is a :class:`ConfigurationError` whose
one-line message names the target and what was looked for.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from .._app import App
from .._errors import ConfigurationError
from ..agents import BaseAgent

__all__ = ["load_agent", "load_agents", "load_apps"]

ATTRIBUTES = ("app", "root_agent")
"""What a module is searched for, in this order, when the target names no attribute."""

Found = tuple[str | None, BaseAgent | App]
"""An app as found in a module: its name (None: the agent's) and the agent or the app."""


def load_agent(target: str) -> BaseAgent:
    """The root agent of the single app ``target`` names (see the module docs for the forms)."""
    apps = load_agents(target)
    if len(apps) != 1:
        raise ConfigurationError(f"{target!r} holds several apps: {sorted(apps)}")
    return next(iter(apps.values()))


def load_agents(target: str) -> dict[str, BaseAgent]:
    """The root agents of the apps of ``target``, by app name (see :func:`load_apps`)."""
    return {name: _root(found) for name, found in load_apps(target).items()}


def load_apps(target: str) -> dict[str, BaseAgent | App]:
    """The apps of ``target``, by app name: a :class:`~trio_agents.App` as is, else the agent.

    A module or file target names its app after the ``app``'s name or the root agent's name; a
    package directory after the directory; a directory of packages holds one app per package.
    """
    location, attribute = _split(target)
    path = Path(location)
    if path.is_dir():
        if attribute is not None:
            raise ConfigurationError(f"{target!r}: a directory target takes no ':attribute'")
        return _load_directory(target, path)
    if location.endswith(".py") or path.is_file():
        if not path.is_file():
            raise ConfigurationError(f"{target!r}: no file {location!r}")
        return _named(_from_module(target, _import_file(target, path), attribute))
    _on_path(Path.cwd())
    return _named(_from_module(target, _import(target, location), attribute))


def _root(found: BaseAgent | App) -> BaseAgent:
    return found.root_agent if isinstance(found, App) else found


def _split(target: str) -> tuple[str, str | None]:
    """``location[:attribute]``; a Windows drive letter is not an attribute."""
    location, colon, attribute = target.rpartition(":")
    if not colon or not attribute.isidentifier() or len(location) < 2:
        return target, None
    return location, attribute


def _named(found: Found) -> dict[str, BaseAgent | App]:
    name, agent = found
    return {name or agent.name: agent}


def _load_directory(target: str, root: Path) -> dict[str, BaseAgent | App]:
    if _is_package(root):
        _on_path(root.resolve().parent)
        module = _import(target, root.name)
        found = _search(module, target) if _has_any(module) else _package_app(target, root.name)
        if found is not None:
            return {root.name: found[1]}
    _on_path(root.resolve())
    apps: dict[str, BaseAgent | App] = {}
    for package in sorted(p for p in root.iterdir() if p.is_dir() and _is_package(p)):
        found = _package_app(target, package.name)
        if found is not None:
            apps[package.name] = found[1]
    if not apps:
        raise ConfigurationError(
            f"{target!r}: no agent packages here or under it exposing "
            f"{' or '.join(ATTRIBUTES)} (in __init__.py or agent.py)"
        )
    return apps


def _is_package(path: Path) -> bool:
    return (path / "__init__.py").is_file() or (path / "agent.py").is_file()


def _has_any(module: ModuleType) -> bool:
    return any(hasattr(module, name) for name in ATTRIBUTES)


def _has_agent_module(module: ModuleType) -> bool:
    """``module`` is a package with an ``agent`` module, where ADK projects keep their agent."""
    paths = getattr(module, "__path__", None) or []
    return any((Path(p) / "agent.py").is_file() for p in paths)


def _package_app(target: str, name: str) -> Found | None:
    """The app of package ``name``: in its ``__init__`` or else in its ``agent`` module."""
    module = _import(target, name)
    if _has_any(module):
        return _search(module, target)
    if not _has_agent_module(module):
        return None
    agent_module = _import(target, f"{name}.agent")
    return _search(agent_module, target) if _has_any(agent_module) else None


def _from_module(target: str, module: ModuleType, attribute: str | None) -> Found:
    if attribute is not None:
        if not hasattr(module, attribute) and _has_agent_module(module):
            module = _import(target, f"{module.__name__}.agent")  # ADK keeps it there
        if not hasattr(module, attribute):
            raise ConfigurationError(
                f"{target!r}: module {module.__name__!r} has no attribute {attribute!r}"
            )
        return _as_app(target, getattr(module, attribute), attribute)
    if not _has_any(module) and hasattr(module, "__path__"):
        found = _package_app(target, module.__name__)
        if found is not None:
            return found
    if not _has_any(module):
        raise ConfigurationError(
            f"{target!r}: module {module.__name__!r} defines neither {' nor '.join(ATTRIBUTES)}"
        )
    return _search(module, target)


def _search(module: ModuleType, target: str) -> Found:
    for name in ATTRIBUTES:
        if hasattr(module, name):
            return _as_app(target, getattr(module, name), name)
    raise AssertionError("callers check _has_any first")


def _as_app(target: str, value: Any, attribute: str) -> Found:
    """An agent or an :class:`App` as is; another ``App``-like object (``name`` and
    ``root_agent``, e.g. google-adk's) as its root agent."""
    if isinstance(value, BaseAgent):
        return None, value
    if isinstance(value, App):
        return value.name, value
    root = getattr(value, "root_agent", None)
    name = getattr(value, "name", None)
    if isinstance(root, BaseAgent) and isinstance(name, str) and name:
        return name, root
    what = type(root).__name__ if root is not None else type(value).__name__
    raise ConfigurationError(
        f"{target!r}: {attribute!r} is not a trio_agents agent or app (got {what})"
    )


def _import(target: str, module_name: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and f"{module_name}.".startswith(f"{exc.name}."):
            where = Path.cwd()
            raise ConfigurationError(
                f"{target!r}: no module {module_name!r} (looked in {str(where)!r} and on "
                "sys.path; a file is path/to/file.py, a package a directory)"
            ) from exc
        raise _failed(target, exc) from exc
    except Exception as exc:
        raise _failed(target, exc) from exc


def _import_file(target: str, path: Path) -> ModuleType:
    """Import ``path`` as the module named after the file, its directory first on sys.path."""
    path = path.resolve()
    _on_path(path.parent)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ConfigurationError(f"{target!r}: {str(path)!r} cannot be imported as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[path.stem]
        raise _failed(target, exc) from exc
    return module


def _failed(target: str, exc: BaseException) -> ConfigurationError:
    """Importing the user's code raised: say what and where, on one line."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})" if frames else ""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f" ({Path(exc.filename).name}, line {exc.lineno})"
    message = str(exc.msg if isinstance(exc, SyntaxError) else exc)
    return ConfigurationError(
        f"{target!r}: importing it raised {type(exc).__name__}: {message}{where}"
    )


def _on_path(directory: Path) -> None:
    """Put ``directory`` first on ``sys.path`` for good: the app's later imports need it too."""
    entry = str(directory)
    if entry not in sys.path:
        sys.path.insert(0, entry)
