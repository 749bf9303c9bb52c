"""Instruction templating (R-TPL): ``{key}``, ``{key?}``, prefixed keys, ``{artifact.name}``."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError, TemplateKeyError

if TYPE_CHECKING:
    from .._context import ReadonlyContext

__all__ = ["inject_session_state"]

# A run of "{", text without braces, a run of "}" -- unless the first "{" follows "$", "{" or "\".
_PLACEHOLDER = re.compile(r"(?<![$\\{])\{+[^{}]*\}+")
_PREFIXES = ("app:", "user:", "temp:")


def _valid_state_name(name: str) -> bool:
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :].isidentifier()
    return name.isidentifier()


async def inject_session_state(template: str, ctx: ReadonlyContext) -> str:
    """Render ``template`` against the live session state and artifacts of ``ctx``.

    ``{key}`` is replaced by ``str(state[key])`` (``None`` renders empty); ``{key?}`` renders
    empty when the key is missing; ``{artifact.f.txt}`` inserts the text of the latest version of
    a session artifact. A name that is not a valid state name is left untouched, as is a
    placeholder preceded by ``$``, ``{`` or a backslash.

    Raises:
        TemplateKeyError: a required key or artifact is missing (names key and agent).
    """
    pieces: list[str] = []
    end = 0
    for match in _PLACEHOLDER.finditer(template):
        pieces.append(template[end : match.start()])
        pieces.append(await _render(match.group(), ctx))
        end = match.end()
    pieces.append(template[end:])
    return "".join(pieces)


async def _render(placeholder: str, ctx: ReadonlyContext) -> str:
    name = placeholder.strip("{}").strip()
    optional = name.endswith("?")
    if optional:
        name = name[:-1]
    if name.startswith("artifact."):
        return await _artifact_text(name[len("artifact.") :], optional, ctx, placeholder)
    if not _valid_state_name(name):
        return placeholder
    state = ctx.state
    if name not in state:
        if optional:
            return ""
        raise TemplateKeyError(key=name, agent=ctx.agent_name)
    value: Any = state[name]
    return "" if value is None else str(value)


async def _artifact_text(filename: str, optional: bool, ctx: ReadonlyContext, raw: str) -> str:
    if not filename:
        return raw
    service = ctx._ctx.artifact_service
    if service is None:
        raise ConfigurationError("Artifact service is not initialized.")
    part = await service.load_artifact(
        app_name=ctx._ctx.app_name,
        user_id=ctx._ctx.user_id,
        session_id=ctx.session.id,
        filename=filename,
    )
    if part is None:
        if optional:
            return ""
        raise TemplateKeyError(key=f"artifact.{filename}", agent=ctx.agent_name)
    return part.text or ""
