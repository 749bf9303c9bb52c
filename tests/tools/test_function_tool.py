"""FunctionTool: declarations from signatures and docstrings, argument handling (R-TOOL-4)."""

from __future__ import annotations

import dataclasses
import enum
import threading
from typing import Any, Literal, Optional, Union

import attrs
import pydantic
import pytest

from tests.agents.llm_helpers import chat, fc, responses
from trio_agents import CallbackContext, ConfigurationError, LlmAgent, ToolContext
from trio_agents.testing import ScriptedModel
from trio_agents.tools import FunctionTool, LongRunningFunctionTool


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.define
class Point:
    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    label: str
    corners: list[Point] = dataclasses.field(default_factory=list)
    level: Level = Level.LOW


class Opaque:
    """Not describable as JSON schema."""


def parameters(func: Any) -> Any:
    declaration = FunctionTool(func).declaration()
    return declaration.parameters


def schema_of(hint: Any) -> Any:
    def f(value: Any) -> None: ...

    f.__annotations__ = {"value": hint, "return": None}
    params = parameters(f)
    return params["properties"]["value"]


async def invoke(tool: FunctionTool, **args: Any) -> Any:
    """Run a tool that takes no context, outside any agent."""
    return await tool.run_async(args=args, tool_context=None)  # type: ignore[arg-type]


# -- declarations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array", "items": {}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (set[float], {"type": "array", "items": {"type": "number"}}),
        (
            list[list[bool]],
            {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}},
        ),
        (dict[str, int], {"type": "object"}),
        (dict, {"type": "object"}),
        (Optional[int], {"type": "integer", "nullable": True}),  # ruff: ignore[non-pep604-annotation-optional]
        (int | None, {"type": "integer", "nullable": True}),
        (Union[int, str], {"anyOf": [{"type": "integer"}, {"type": "string"}]}),  # ruff: ignore[non-pep604-annotation-union]
        (int | str | None, {"anyOf": [{"type": "integer"}, {"type": "string"}], "nullable": True}),
        (Literal["a", "b"], {"enum": ["a", "b"]}),
        (Color, {"type": "string", "enum": ["red", "blue"]}),
        (Level, {"type": "string", "enum": ["1", "2"]}),
        (Any, {}),
        (
            Point,
            {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x"],
            },
        ),
        (
            Box,
            {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "corners": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                            "required": ["x"],
                        },
                    },
                    "level": {"type": "string", "enum": ["1", "2"]},
                },
                "required": ["label"],
            },
        ),
    ],
    ids=lambda v: repr(v) if not isinstance(v, dict) else "",
)
def test_parameter_types_become_json_schema(hint: Any, schema: Any) -> None:
    assert schema_of(hint) == schema


def test_declaration_name_description_and_required_parameters() -> None:
    def book_flight(origin: str, destination: str, seats: int = 1, note: str | None = None) -> str:
        """Book a flight.

        Args:
            origin: where from.
        """
        return "booked"

    declaration = FunctionTool(book_flight).declaration()
    assert declaration.name == "book_flight"
    assert declaration.description == "Book a flight.\n\nArgs:\n    origin: where from."
    assert declaration.parameters == {
        "type": "object",
        "properties": {
            "origin": {"type": "string"},
            "destination": {"type": "string"},
            "seats": {"type": "integer"},
            "note": {"type": "string", "nullable": True},
        },
        "required": ["origin", "destination"],
    }


def test_all_defaults_means_no_required_list() -> None:
    def f(a: int = 1, b: str = "") -> None: ...

    assert parameters(f) == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
    }


def test_no_parameters_means_no_parameter_schema() -> None:
    def ping() -> str:
        return "pong"

    assert parameters(ping) is None


def test_unannotated_parameters_accept_anything() -> None:
    def f(a, b=2):  # type: ignore[no-untyped-def]
        return a

    assert parameters(f) == {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a"]}


def test_context_parameters_are_hidden_from_the_declaration_r_tool_4() -> None:
    def by_annotation(q: str, ctx: ToolContext) -> None: ...

    def by_base_annotation(q: str, context: CallbackContext) -> None: ...

    def by_name(q: str, tool_context) -> None:  # type: ignore[no-untyped-def]
        ...

    expected = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    for func in (by_annotation, by_base_annotation, by_name):
        assert parameters(func) == expected

    def only_context(tool_context: ToolContext) -> None: ...

    assert parameters(only_context) is None


def test_variadic_parameters_are_not_declared() -> None:
    def f(a: int, *args: int, **kwargs: str) -> None: ...

    assert parameters(f) == {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
    }


def test_name_and_description_can_be_overridden() -> None:
    def f() -> None:
        """Docstring."""

    declaration = FunctionTool(f, name="renamed", description="Explicit.").declaration()
    assert (declaration.name, declaration.description) == ("renamed", "Explicit.")
    assert FunctionTool(f, description="").declaration().description == ""


def test_a_function_without_docstring_has_an_empty_description() -> None:
    def f() -> None: ...

    assert FunctionTool(f).description == ""


def test_an_undescribable_type_is_a_configuration_error() -> None:
    def f(blob: bytes) -> None: ...

    def g(thing: Opaque) -> None: ...

    with pytest.raises(ConfigurationError, match="tool 'f' blob"):
        FunctionTool(f)
    with pytest.raises(ConfigurationError, match="tool 'g' thing"):
        FunctionTool(g)


def test_unresolvable_type_hints_are_a_configuration_error() -> None:
    def f(x: int) -> None: ...

    f.__annotations__ = {"x": "NoSuchType"}

    with pytest.raises(ConfigurationError, match="tool 'f': cannot resolve its type hints"):
        FunctionTool(f)


def test_a_non_callable_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="needs a callable"):
        FunctionTool("not a function")  # type: ignore[arg-type]


def test_long_running_flag() -> None:
    def f() -> None: ...

    assert FunctionTool(f).is_long_running is False
    assert LongRunningFunctionTool(f).is_long_running is True
    assert FunctionTool(f, is_long_running=True).is_long_running is True


# -- running -------------------------------------------------------------------------------------


async def test_sync_and_async_functions_return_their_result() -> None:
    def sync_add(a: int, b: int = 10) -> int:
        return a + b

    async def async_add(a: int, b: int = 10) -> int:
        return a + b

    for func in (sync_add, async_add):
        tool = FunctionTool(func)
        assert await invoke(tool, a=1) == 11
        assert await invoke(tool, a=1, b=2) == 3


async def test_sync_functions_run_in_a_worker_thread() -> None:
    def where() -> int:
        return threading.get_ident()

    assert await invoke(FunctionTool(where)) != threading.get_ident()


async def test_records_and_enums_are_built_from_json_arguments() -> None:
    seen: dict[str, Any] = {}

    def draw(
        point: Point,
        box: Box,
        color: Color,
        level: Level,
        maybe: Point | None = None,
        many: list[Point] | None = None,
        levels: list[Level] | None = None,
    ) -> str:
        seen.update(locals())
        return "drawn"

    tool = FunctionTool(draw)
    result = await invoke(
        tool,
        point={"x": 1},
        box={"label": "b", "corners": [{"x": 2, "y": 3}], "level": "2"},
        color="blue",
        level="2",  # the declaration offers the values as strings
        maybe={"x": 5},
        many=[{"x": 6}],
        levels=["1", 2],
    )
    assert result == "drawn"
    assert seen["point"] == Point(x=1)
    assert seen["box"] == Box(label="b", corners=[Point(x=2, y=3)], level=Level.HIGH)
    assert seen["color"] is Color.BLUE
    assert seen["level"] is Level.HIGH
    assert seen["maybe"] == Point(x=5)
    assert seen["many"] == [Point(x=6)]
    assert seen["levels"] == [Level.LOW, Level.HIGH]


class Item(pydantic.BaseModel):
    name: str
    qty: int = 1


async def test_pydantic_parameters_are_declared_and_validated_from_json_arguments() -> None:
    # ADK 2.13 declares a pydantic parameter by its model's schema and hands the function an
    # instance built from the JSON arguments.
    seen: dict[str, Any] = {}

    def order(item: Item, extras: list[Item] | None = None) -> str:
        seen.update(locals())
        return "ordered"

    tool = FunctionTool(order)
    properties = tool.declaration().parameters["properties"]
    assert properties["item"]["properties"] == Item.model_json_schema()["properties"]
    assert await invoke(tool, item={"name": "pen"}, extras=[{"name": "ink", "qty": 2}]) == "ordered"
    assert seen["item"] == Item(name="pen")
    assert seen["extras"] == [Item(name="ink", qty=2)]
    answer = await invoke(tool, item={"qty": 2})
    assert "invalid arguments" in answer["error"]


async def test_optional_record_accepts_none() -> None:
    def f(p: Point | None = None) -> str:
        return repr(p)

    assert await invoke(FunctionTool(f), p=None) == "None"


async def test_plain_values_are_passed_through_unchanged() -> None:
    def f(items: list[int], mapping: dict[str, Any], flag: bool, anything: Any = None) -> Any:
        return [items, mapping, flag, anything]

    result = await invoke(
        FunctionTool(f), items=[1, 2], mapping={"k": [1]}, flag=True, anything={"x": None}
    )
    assert result == [[1, 2], {"k": [1]}, True, {"x": None}]


@pytest.mark.parametrize(
    ("args", "detail"),
    [
        ({"point": {"y": 1}}, "Invoking `place()` failed: invalid arguments"),
        ({"point": {"x": 1}, "color": "green"}, "green"),
        ({"point": "nowhere"}, "Invoking `place()` failed: invalid arguments"),
    ],
)
async def test_arguments_that_do_not_fit_are_an_error_result(args: Any, detail: str) -> None:
    ran: list[bool] = []

    def place(point: Point, color: Color = Color.RED) -> None:
        ran.append(True)

    result = await invoke(FunctionTool(place), **args)
    assert set(result) == {"error"}
    assert detail in result["error"]
    assert ran == []


async def test_every_missing_mandatory_parameter_is_named_in_order_r_tool_4() -> None:
    def f(a: int, b: int, c: int = 0) -> None: ...

    result = await invoke(FunctionTool(f), c=1)
    assert result == {
        "error": "Invoking `f()` failed as the following mandatory input parameters are not "
        "present:\na\nb\nYou could retry calling this tool, but it is IMPORTANT for you to "
        "provide all the mandatory parameters."
    }


async def test_exceptions_from_the_function_propagate() -> None:
    def f() -> None:
        raise LookupError("nope")

    with pytest.raises(LookupError, match="nope"):
        await invoke(FunctionTool(f))


async def test_context_is_injected_under_the_parameters_own_name_r_tool_4() -> None:
    seen: list[Any] = []

    def annotated(q: str, ctx: ToolContext) -> str:
        seen.append(("annotated", type(ctx).__name__, ctx.function_call_id))
        ctx.state["annotated"] = q
        return q

    def named(q: str, tool_context) -> str:  # type: ignore[no-untyped-def]
        seen.append(("named", type(tool_context).__name__, tool_context.function_call_id))
        return q

    model = ScriptedModel(
        [fc("annotated", {"q": "a"}, id="c1"), fc("named", {"q": "b"}, id="c2"), "ok"]
    )
    events = await chat(LlmAgent(name="agent", model=model, tools=[annotated, named]))
    assert seen == [("annotated", "ToolContext", "c1"), ("named", "ToolContext", "c2")]
    assert responses(events[1]) == [("annotated", {"result": "a"})]
    assert dict(events[1].actions.state_delta) == {"annotated": "a"}


async def test_the_model_cannot_override_the_context_argument() -> None:
    def f(tool_context: ToolContext) -> str:
        return type(tool_context).__name__

    model = ScriptedModel([fc("f", {"tool_context": "forged"}), "ok"])
    events = await chat(LlmAgent(name="agent", model=model, tools=[f]))
    assert responses(events[1]) == [("f", {"result": "ToolContext"})]
