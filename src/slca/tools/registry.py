"""Tool registry and JSON-schema builders shared by the domain modules.

Each domain module declares its tools with `@tool(domain, name, description, parameters,
response)` on the executor function; `REGISTRY` maps the tool name to its schema and executor.
Executors take `(world, arguments)` and return the success payload, or raise `ToolError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Executor = Callable[[Any, dict], dict]


class ToolError(Exception):
    """A business-rule failure raised by an executor (error_class: not_found or conflict)."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.message = message


def not_found(kind: str, value: Any, hint: str = "") -> ToolError:
    """An unknown identifier, phrased so a model learns where valid ids come from."""
    tail = f" {hint}" if hint else ""
    return ToolError("not_found", f"No {kind} found with id {value}.{tail}")


def conflict(message: str) -> ToolError:
    return ToolError("conflict", message)


@dataclass(frozen=True)
class ToolSpec:
    schema: dict
    executor: Executor


REGISTRY: dict[str, ToolSpec] = {}


def tool(domain: str, name: str, description: str, parameters: dict, response: dict) -> Callable:
    """Register the decorated executor under `name` with its parameter and response schemas."""

    def wrap(fn: Executor) -> Executor:
        if name in REGISTRY:
            raise ValueError(f"duplicate tool name {name!r}")
        schema = {
            "name": name,
            "description": description,
            "parameters": parameters,
            "response": response,
            "domain": domain,
        }
        REGISTRY[name] = ToolSpec(schema=schema, executor=fn)
        return fn

    return wrap


# ---- schema builders (keep the domain modules short and uniform) ----


def params(properties: dict, required: list[str] | None = None) -> dict:
    """Top-level parameter schema: an object with `required` and no extra keys."""
    return {"type": "object", "properties": properties, "required": list(required or []), "additionalProperties": False}


def obj(properties: dict, required: list[str] | None = None, description: str = "") -> dict:
    """Nested object; `required=None` means every property is required (response payloads)."""
    schema: dict = {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else list(required),
        "additionalProperties": False,
    }
    if description:
        schema["description"] = description
    return schema


def string(description: str = "", **extra: Any) -> dict:
    return _typed("string", description, extra)


def integer(description: str = "", minimum: int | None = None, maximum: int | None = None, **extra: Any) -> dict:
    return _typed("integer", description, _bounds(minimum, maximum, extra))


def number(description: str = "", minimum: float | None = None, maximum: float | None = None, **extra: Any) -> dict:
    return _typed("number", description, _bounds(minimum, maximum, extra))


def boolean(description: str = "", **extra: Any) -> dict:
    return _typed("boolean", description, extra)


def enum(values: list[str] | tuple[str, ...], description: str = "", **extra: Any) -> dict:
    return _typed("string", description, {"enum": list(values), **extra})


def array(
    items: dict, description: str = "", min_items: int | None = None, max_items: int | None = None, **extra: Any
) -> dict:
    bounds = {k: v for k, v in (("minItems", min_items), ("maxItems", max_items)) if v is not None}
    return _typed("array", description, {"items": items, **bounds, **extra})


def date(description: str = "Date in YYYY-MM-DD format.") -> dict:
    return string(description, format="date")


def nullable(schema: dict) -> dict:
    """Allow null alongside the schema's own type (e.g. a gate not yet assigned)."""
    return {**schema, "type": [schema["type"], "null"]}


def _bounds(minimum: Any, maximum: Any, extra: dict) -> dict:
    out = dict(extra)
    if minimum is not None:
        out["minimum"] = minimum
    if maximum is not None:
        out["maximum"] = maximum
    return out


def _typed(kind: str, description: str, extra: dict) -> dict:
    schema: dict = {"type": kind}
    if description:
        schema["description"] = description
    schema.update(extra)
    return schema
