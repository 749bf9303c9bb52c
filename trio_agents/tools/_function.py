"""FunctionTool: a Python function offered to the model, declared from its signature."""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any, ClassVar

import attrs
import cattrs
import trio

from .._context import CallbackContext
from .._errors import ConfigurationError
from ..models._base import FunctionDeclaration
from ._base import BaseTool, ToolContext
from ._confirm import ConfirmationRule
from ._schema import is_pydantic_model, json_schema

__all__ = ["FunctionTool", "LongRunningFunctionTool"]

_converter = cattrs.Converter()
_converter.register_structure_hook_func(
    is_pydantic_model, lambda value, cls: cls.model_validate(value)
)


def _is_enum(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, enum.Enum)


def _structure_enum(value: Any, cls: type[enum.Enum]) -> enum.Enum:
    """A member from its value, or from the string form the declaration offers (``"1"``)."""
    if isinstance(value, cls):
        return value
    for member in cls:
        if member.value == value or (isinstance(value, str) and str(member.value) == value):
            return member
    raise ValueError(f"{value!r} is not a valid {cls.__name__}")


def _register_enums(hint: Any, seen: set[int]) -> None:
    """Route every enum reachable from ``hint`` through :func:`_structure_enum`.

    Registered per class: cattrs would otherwise dispatch an ``IntEnum`` as an ``int``.
    """
    if id(hint) in seen:
        return
    seen.add(id(hint))
    if _is_enum(hint):
        _converter.register_structure_hook(hint, _structure_enum)
    elif isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint)):
        for field_hint in typing.get_type_hints(hint).values():
            _register_enums(field_hint, seen)
    elif typing.get_origin(hint) is not typing.Literal:
        for arg in typing.get_args(hint):
            _register_enums(arg, seen)


def _is_context(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, CallbackContext)


def _needs_structuring(hint: Any) -> bool:
    """Whether ``hint`` names a record or an enum, also inside ``Optional``, ``list[...]``..."""
    if isinstance(hint, type) and (attrs.has(hint) or dataclasses.is_dataclass(hint)):
        return True
    if _is_enum(hint) or is_pydantic_model(hint):
        return True
    return typing.get_origin(hint) is not typing.Literal and any(
        _needs_structuring(arg) for arg in typing.get_args(hint)
    )


class FunctionTool(BaseTool):
    """Wraps a sync or async function as a tool.

    The declaration comes from the signature, the type hints and the docstring: scalars, lists,
    dicts, optional and defaulted parameters, enums, ``Literal``, attrs classes, dataclasses and
    pydantic models.
    A parameter annotated with :class:`ToolContext` (or named ``tool_context``) receives the
    call's context and is not declared. Sync functions run in a worker thread
    (``trio.to_thread.run_sync``, under Trio's default thread limiter) so they never block the
    event loop, except those that take a :class:`ToolContext`: they run on the Trio thread, so
    a read-modify-write of ``tool_context.state`` is atomic with respect to every other branch
    (make such a tool ``async``, or keep its blocking work out of it, if it is slow).

    ``require_confirmation`` (a bool, or a sync or async callable of the tool's arguments that
    returns one) makes a call wait for the user's approval: the call first answers the model
    with a provisional error and asks for a confirmation; the user's answer runs it again, and
    only an approval runs the function (a rejection tells the model the tool did not run).
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        is_long_running: bool = False,
        timeout: float | None = None,
        require_confirmation: bool | Callable[..., Any] = False,
    ) -> None:
        if not callable(func):
            raise ConfigurationError(f"FunctionTool needs a callable, got {func!r}")
        tool_name: str = name or getattr(func, "__name__", "") or ""
        self.confirmation = ConfirmationRule(tool_name, require_confirmation)
        super().__init__(
            name=tool_name,
            description=description if description is not None else inspect.getdoc(func) or "",
            is_long_running=is_long_running,
            timeout=timeout,
        )
        self.func = func
        self._is_async = inspect.iscoroutinefunction(func)
        self._hints = _type_hints(func, tool_name)
        self._context_param: str | None = None
        self._params: dict[str, inspect.Parameter] = {}
        for param in inspect.signature(func).parameters.values():
            hint = self._hints.get(param.name)
            if _is_context(hint) or (param.name == "tool_context" and hint is None):
                self._context_param = param.name
            elif param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                self._params[param.name] = param
        self._required = [n for n, p in self._params.items() if p.default is p.empty]
        self._required_set = frozenset(self._required)
        self._structured = {
            n: hint
            for n in self._params
            if (hint := self._hints.get(n)) is not None and _needs_structuring(hint)
        }
        """The parameters whose values go through the converter (records, enums), by name."""
        self._declaration = FunctionDeclaration(
            name=self.name, description=self.description, parameters=self._schema()
        )
        seen: set[int] = set()
        for param_name in self._params:
            _register_enums(self._hints.get(param_name, Any), seen)

    def _schema(self) -> dict[str, Any] | None:
        if not self._params:
            return None
        properties = {
            name: json_schema(self._hints.get(name, Any), where=f"tool {self.name!r} {name}")
            for name in self._params
        }
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if self._required:
            schema["required"] = list(self._required)
        return schema

    def declaration(self) -> FunctionDeclaration:
        return self._declaration

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        if not args.keys() >= self._required_set:
            missing = [n for n in self._required if n not in args]
            return {"error": _missing_message(self.name, missing)}
        try:
            kwargs = self._arguments(args)
        except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
            return {"error": f"Invoking `{self.name}()` failed: invalid arguments: {exc}"}
        confirmation = self.confirmation
        if confirmation.rule is not False and (
            gated := await confirmation.gate(kwargs, tool_context)
        ):
            return gated
        if self._context_param is not None:
            kwargs[self._context_param] = tool_context
        if self._is_async:
            return await self.func(**kwargs)
        if self._context_param is not None:
            # On the Trio thread: its state reads and writes are atomic with respect to every
            # other branch (a worker thread could interleave between a read and its write).
            await trio.lowlevel.checkpoint()
            return self.func(**kwargs)
        return await trio.to_thread.run_sync(functools.partial(self.func, **kwargs))

    def _arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """The declared arguments (others are dropped, R-TOOL-4), records and enums structured
        from their JSON form."""
        params, structured = self._params, self._structured
        if not structured and args.keys() <= params.keys():
            return dict(args)  # the common case: nothing to drop, nothing to structure
        return {
            k: _converter.structure(v, structured[k]) if k in structured else v
            for k, v in args.items()
            if k in params
        }


class LongRunningFunctionTool(FunctionTool):
    """A :class:`FunctionTool` whose answer may come later (R-LRO-1..3).

    The model event calling it is final (``long_running_tool_ids``). A falsy result ends the step;
    the client answers later with a ``FunctionResponse`` carrying the call id.
    """

    NOTE: ClassVar[str] = (
        "NOTE: this is a long-running operation. Do not call this tool again if it has already "
        "returned a pending or intermediate status; its final result arrives later."
    )
    """Appended to the description so the model does not call the tool again (ADK §2.8)."""

    def __init__(self, func: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(func, is_long_running=True, **kwargs)
        described = f"{self.description}\n\n{self.NOTE}" if self.description else self.NOTE
        self.description = described
        self._declaration = attrs.evolve(self._declaration, description=described)


def _type_hints(func: Callable[..., Any], name: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except Exception as exc:
        raise ConfigurationError(f"tool {name!r}: cannot resolve its type hints: {exc}") from exc


def _missing_message(name: str, missing: list[str]) -> str:
    lines = "\n".join(missing)
    return (
        f"Invoking `{name}()` failed as the following mandatory input parameters are not "
        f"present:\n{lines}\nYou could retry calling this tool, but it is IMPORTANT for you to "
        "provide all the mandatory parameters."
    )
