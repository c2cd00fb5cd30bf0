"""Tool catalog with real, deterministic executors over a seeded in-memory world.

    from slca.tools import World, catalog, execute
    world = World(seed=7)
    result = execute(world, "get_current_weather", {"city": "Lima"})  # ExecResult(ok=True, ...)

`execute` validates arguments against the tool's JSON schema (Draft 2020-12), runs the
executor, and never raises: every failure becomes `ExecResult(ok=False, error, error_class)`.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from typing import Any

from slca.tools import agenda, banking, flights, mathunits, retail, science, weather  # noqa: F401  (register)
from slca.tools.entities import CITIES, CURRENCY_RATES, PRODUCT_CATEGORIES, UNITS
from slca.tools.examples import example_calls
from slca.tools.registry import REGISTRY, ToolError
from slca.tools.validation import (
    coerce_integers,
    unknown_tool_message,
    validate_arguments,
)
from slca.tools.world import World

DOMAINS: tuple[str, ...] = ("weather", "flights", "banking", "calendar", "retail", "math", "science")
ERROR_CLASSES: tuple[str, ...] = (
    "unknown_tool",
    "missing_required",
    "unexpected_argument",
    "type",
    "enum",
    "range",
    "format",
    "not_found",
    "conflict",
)

__all__ = [
    "DOMAINS",
    "ENTITY_KINDS_BY_DOMAIN",
    "ERROR_CLASSES",
    "ExecResult",
    "World",
    "as_openai_tool",
    "catalog",
    "entity_pools",
    "example_calls",
    "execute",
    "tool_map",
    "tools_in_domain",
    "validate_arguments",
]


@dataclass(frozen=True)
class ExecResult:
    ok: bool
    content: dict | None = None
    error: str | None = None
    error_class: str | None = None


def catalog() -> list[dict]:
    """Every tool schema (name, description, parameters, response, domain); fresh copies."""
    return json.loads(_catalog_json())  # a fresh copy each call; callers may mutate it


@functools.cache
def _catalog_json() -> str:
    specs = sorted(REGISTRY.values(), key=lambda spec: DOMAINS.index(spec.schema["domain"]))
    return json.dumps([spec.schema for spec in specs])  # stable sort keeps declaration order


def tool_map() -> dict[str, dict]:
    return {s["name"]: s for s in catalog()}


def tools_in_domain(domain: str) -> list[dict]:
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; choose one of {list(DOMAINS)}")
    return [s for s in catalog() if s["domain"] == domain]


def as_openai_tool(schema: dict) -> dict:
    """OpenAI function-tool form of a catalog schema (drops response and domain)."""
    return {
        "type": "function",
        "function": {
            "name": schema["name"],
            "description": schema["description"],
            "parameters": copy.deepcopy(schema["parameters"]),
        },
    }


def execute(world: World, name: Any, arguments: Any) -> ExecResult:
    """Validate then run tool `name` on `world` (mutating it for write tools); never raises."""
    spec = REGISTRY.get(name) if isinstance(name, str) else None
    if spec is None:
        return ExecResult(False, error=unknown_tool_message(name), error_class="unknown_tool")
    try:
        problem = validate_arguments(spec.schema, arguments)
        if problem is not None:
            return ExecResult(False, error=problem[1], error_class=problem[0])
        args = coerce_integers(spec.schema["parameters"], copy.deepcopy(arguments or {}))
        content = spec.executor(world, args)
        return ExecResult(True, content=copy.deepcopy(content))
    except ToolError as exc:
        return ExecResult(False, error=exc.message, error_class=exc.error_class)
    except Exception as exc:  # noqa: BLE001  an executor bug must not crash a rollout; report it as a failed call
        return ExecResult(False, error=f"Tool {name} could not process the request: {exc}", error_class="conflict")


# which entity_pools() kinds each domain's tasks draw on
ENTITY_KINDS_BY_DOMAIN: dict[str, tuple[str, ...]] = {
    "weather": ("city", "country"),
    "flights": ("city", "airport"),
    "banking": ("account_holder", "bank_customer_id", "account_id", "currency"),
    "calendar": ("event_id", "event_title", "contact_name", "contact_email"),
    "retail": ("product_name", "product_id", "product_category", "shopper_name", "shopper_email", "order_id"),
    "math": ("unit", "currency"),
    "science": (),  # bare numbers stated in the request, no named entities
}


def entity_pools(world: World) -> dict[str, list[str]]:
    """Entity names per kind that task synthesis can draw on (and hold out for test splits).

    Kinds per domain are listed in ENTITY_KINDS_BY_DOMAIN; same world seed -> same pools.
    """
    return {
        "city": [c[0] for c in CITIES],
        "airport": [c[2] for c in CITIES],
        "country": sorted({c[1] for c in CITIES}),
        "account_holder": [c["name"] for c in world.bank_customers.values()],
        "bank_customer_id": list(world.bank_customers),
        "account_id": list(world.accounts),
        "contact_name": [c["name"] for c in world.contacts],
        "contact_email": [c["email"] for c in world.contacts],
        "event_id": list(world.events),
        "event_title": sorted({e["title"] for e in world.events.values()}),
        "product_name": [p["name"] for p in world.products.values()],
        "product_id": list(world.products),
        "product_category": list(PRODUCT_CATEGORIES),
        "shopper_name": [s["name"] for s in world.shoppers.values()],
        "shopper_email": [s["email"] for s in world.shoppers.values()],
        "order_id": list(world.orders),
        "currency": list(CURRENCY_RATES),
        "unit": list(UNITS),
    }
