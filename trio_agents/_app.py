"""An app: a named root agent with its plugins and settings, what a Runner runs."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import attrs

from ._errors import ConfigurationError
from .agents._base import BaseAgent
from .plugins._base import BasePlugin

__all__ = ["App", "ResumabilityConfig"]

_APP_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


@attrs.frozen(kw_only=True)
class ResumabilityConfig:
    """Whether an app's invocations may pause on a long-running call and be resumed later.

    Off by default: a run then ends where it stands and the next run answers the open calls,
    as in ADK's non-resumable flow.
    """

    is_resumable: bool = attrs.field(default=False)

    @is_resumable.validator
    def _check(self, attribute: attrs.Attribute[bool], value: object) -> None:
        if not isinstance(value, bool):
            raise ConfigurationError(
                f"ResumabilityConfig.is_resumable must be a bool, got {value!r}"
            )


def _check_name(app: App, attribute: attrs.Attribute[str], name: object) -> None:
    if not isinstance(name, str) or not _APP_NAME.fullmatch(name):
        raise ConfigurationError(
            f"invalid app name {name!r}: it must start with a letter and hold only letters, "
            "digits, underscores and hyphens"
        )
    if name == "user":
        raise ConfigurationError("invalid app name 'user': it is reserved for the end user")


def _check_root(app: App, attribute: attrs.Attribute[BaseAgent], agent: object) -> None:
    if not isinstance(agent, BaseAgent):
        raise ConfigurationError(
            f"app {app.name!r}: root_agent must be a BaseAgent, got {type(agent).__name__}"
        )


def _plugins(plugins: Iterable[BasePlugin]) -> tuple[BasePlugin, ...]:
    return tuple(plugins)


def _check_resumability(
    app: App, attribute: attrs.Attribute[ResumabilityConfig | None], value: object
) -> None:
    if value is not None and not isinstance(value, ResumabilityConfig):
        raise ConfigurationError(
            f"app {app.name!r}: resumability_config must be a ResumabilityConfig or None, "
            f"got {type(value).__name__}"
        )


@attrs.frozen
class App:
    """A named agent application: ``Runner(app=app, session_service=...)`` runs it.

    ``name`` is the app name sessions are stored under (a letter, then letters, digits, ``_``
    or ``-``; not ``"user"``). ``plugins`` apply to every run; ``resumability_config`` says
    whether its invocations can pause and resume.
    """

    name: str = attrs.field(validator=_check_name)
    root_agent: BaseAgent = attrs.field(validator=_check_root)
    plugins: Sequence[BasePlugin] = attrs.field(default=(), converter=_plugins)
    resumability_config: ResumabilityConfig | None = attrs.field(
        default=None, validator=_check_resumability
    )

    @property
    def is_resumable(self) -> bool:
        """Whether ``resumability_config`` turns resumability on."""
        config = self.resumability_config
        return config is not None and config.is_resumable
