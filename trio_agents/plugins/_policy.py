"""ToolPolicyPlugin: allow or deny tool calls per agent, tool and user.

Rules are checked in order and the first one that matches decides; when none matches, the
plugin's default decides (allow, unless told otherwise). A denied call never reaches the tool and
never raises: the model receives an error response, and the denial is counted.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import attrs

from .._errors import ConfigurationError
from ._base import BasePlugin

if TYPE_CHECKING:
    from ..tools._base import BaseTool, ToolContext

__all__ = ["Denial", "ToolPolicyPlugin", "ToolRule", "allow", "deny"]

Effect = Literal["allow", "deny"]


def _check_effect(instance: object, attribute: object, value: str) -> None:
    if value not in ("allow", "deny"):
        raise ConfigurationError(f"a tool rule's effect must be 'allow' or 'deny', got {value!r}")


@attrs.frozen(kw_only=True)
class ToolRule:
    """One rule: ``effect`` applies to calls whose tool, agent and user all match.

    ``tool``, ``agent`` and ``user`` are shell-style patterns (``fnmatch``, case-sensitive):
    ``"*"`` matches anything, ``"search_*"`` a family of tools. ``reason`` is told to the model
    when the rule denies a call.
    """

    effect: Effect = attrs.field(validator=_check_effect)
    tool: str = "*"
    agent: str = "*"
    user: str = "*"
    reason: str = ""

    def matches(self, *, tool: str, agent: str, user: str) -> bool:
        """Whether the rule's three patterns all match this call."""
        return (
            fnmatch.fnmatchcase(tool, self.tool)
            and fnmatch.fnmatchcase(agent, self.agent)
            and fnmatch.fnmatchcase(user, self.user)
        )


def allow(tool: str = "*", *, agent: str = "*", user: str = "*") -> ToolRule:
    """A rule allowing the matching calls."""
    return ToolRule(effect="allow", tool=tool, agent=agent, user=user)


def deny(tool: str = "*", *, agent: str = "*", user: str = "*", reason: str = "") -> ToolRule:
    """A rule denying the matching calls (``reason`` is told to the model)."""
    return ToolRule(effect="deny", tool=tool, agent=agent, user=user, reason=reason)


class Denial(NamedTuple):
    agent: str
    tool: str
    user: str


class ToolPolicyPlugin(BasePlugin):
    """Denies tool calls by rule; a denied call answers the model with an error response.

    The response is ``{"error": "...", "denied_by": <plugin name>}``. Like any ``before_tool``
    result it still passes through the after-tool hooks, and it skips the later plugins'
    ``before_tool`` and the agent's before-tool callbacks. :attr:`denials` counts the denied calls
    by agent, tool and user.
    """

    def __init__(
        self,
        rules: Iterable[ToolRule] = (),
        *,
        name: str = "tool_policy",
        default: Effect = "allow",
    ) -> None:
        super().__init__(name)
        _check_effect(self, None, default)
        self.rules = tuple(rules)
        for rule in self.rules:
            if not isinstance(rule, ToolRule):
                raise ConfigurationError(f"{rule!r} is not a ToolRule")
        self.default: Effect = default
        self._denials: dict[Denial, int] = {}

    def decide(self, *, tool: str, agent: str, user: str) -> ToolRule | None:
        """The first rule matching the call, or None when the default applies."""
        for rule in self.rules:
            if rule.matches(tool=tool, agent=agent, user=user):
                return rule
        return None

    def allows(self, *, tool: str, agent: str, user: str) -> bool:
        """Whether the call is allowed: by the first matching rule, else by ``default``."""
        rule = self.decide(tool=tool, agent=agent, user=user)
        return (rule.effect if rule is not None else self.default) == "allow"

    @property
    def denials(self) -> Mapping[Denial, int]:
        """Denied calls so far, by agent, tool and user."""
        return dict(self._denials)

    @property
    def denied(self) -> int:
        """The number of denied calls so far."""
        return sum(self._denials.values())

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        name = getattr(tool, "name", "")
        agent = tool_context.agent_name
        user = tool_context.session.user_id
        rule = self.decide(tool=name, agent=agent, user=user)
        if (rule.effect if rule is not None else self.default) == "allow":
            return None
        key = Denial(agent, name, user)
        self._denials[key] = self._denials.get(key, 0) + 1
        message = f"Calling `{name}` is not allowed by policy"
        if rule is not None and rule.reason:
            message += f": {rule.reason}"
        return {"error": f"{message}. Do not call it again.", "denied_by": self.name}
