"""Schema-guided synthesis: a response that conforms to a tool's response schema by construction.

Values come, in order of preference, from hints (argument values and records remembered earlier in
the episode, matched by field name and kept only when they fit the field's schema) and from a
seeded generator that respects type, enum, const, bounds, formats and patterns. Arrays of records
start with the remembered records that match (read-after-write), then synthesized ones; a `count`
next to a single array equals its length.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from slca.simulator.clock import BASE_DATE
from slca.simulator.patterns import pattern_string
from slca.simulator.specs import id_examples
from slca.simulator.types import Knobs

WORDS = ("alpha", "harbor", "summit", "meadow", "cedar", "river", "orbit", "atlas", "pioneer", "maple")
Related = Callable[[dict], list[dict]]
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def synthesize(
    schema: Any,
    rng: random.Random,
    hints: dict,
    knobs: Knobs,
    related: Related | None = None,
    name: str = "",
    depth: int = 0,
) -> Any:
    """A value for `schema`; `name` is the field it fills (used for hints and id shapes)."""
    if not isinstance(schema, dict) or depth > 12:
        return None
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return synthesize(schema[key][0], rng, hints, knobs, related, name, depth + 1)
    if "const" in schema:
        return schema["const"]
    if knobs.echo_arguments and name in hints and fits(hints[name], schema):
        return hints[name]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    kind = primary_type(schema)
    if kind == "object":
        return _object(schema, rng, hints, knobs, related, depth)
    if kind == "array":
        return _array(schema, rng, hints, knobs, related, name, depth)
    if kind == "null":
        return None
    return _SCALARS.get(kind, _string)(schema, rng, name)


def primary_type(schema: dict) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        concrete = [k for k in kind if k != "null"]
        return concrete[0] if concrete else "null"
    if isinstance(kind, str):
        return kind
    return "object" if "properties" in schema else "string"


def fits(value: Any, schema: dict) -> bool:
    """Cheap conformance check used before echoing a hint into a field."""
    if "const" in schema:
        return value == schema["const"]
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return False
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds] if kinds else []
    if kinds and not any(_is_type(value, k) for k in kinds):
        return False
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, (int, float)):
        return _in_bounds(value, schema)
    if isinstance(value, str):
        return _string_fits(value, schema)
    if isinstance(value, list):
        items = schema.get("items", {})
        n_ok = schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", math.inf)
        return n_ok and all(fits(item, items) for item in value)
    if isinstance(value, dict):
        return _object_fits(value, schema)
    return False


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "null":
        return value is None
    expected = {"string": str, "boolean": bool, "array": list, "object": dict}.get(kind)
    return expected is not None and type(value) is expected


def _in_bounds(value: float, schema: dict) -> bool:
    checks = (
        ("minimum", lambda lim: value >= lim),
        ("maximum", lambda lim: value <= lim),
        ("exclusiveMinimum", lambda lim: value > lim),
        ("exclusiveMaximum", lambda lim: value < lim),
    )
    return all(check(schema[key]) for key, check in checks if key in schema)


def _string_fits(value: str, schema: dict) -> bool:
    if not schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", math.inf):
        return False
    if schema.get("format") == "date" and not _valid_date(value):
        return False
    if schema.get("format") == "email" and not _EMAIL.match(value):
        return False
    pattern = schema.get("pattern")
    return not pattern or re.search(pattern, value) is not None


def _object_fits(value: dict, schema: dict) -> bool:
    properties = schema.get("properties", {})
    if any(key not in value for key in schema.get("required", [])):
        return False
    if schema.get("additionalProperties") is False and any(key not in properties for key in value):
        return False
    return all(fits(item, properties[key]) for key, item in value.items() if key in properties)


def _valid_date(text: str) -> bool:
    if not _DATE.match(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _object(schema: dict, rng: random.Random, hints: dict, knobs: Knobs, related: Related | None, depth: int) -> dict:
    properties = schema.get("properties", {})
    out = {key: synthesize(sub, rng, hints, knobs, related, key, depth + 1) for key, sub in properties.items()}
    arrays = [key for key, sub in properties.items() if isinstance(out.get(key), list)]
    count_schema = properties.get("count")
    if len(arrays) == 1 and isinstance(count_schema, dict) and fits(len(out[arrays[0]]), count_schema):
        out["count"] = len(out[arrays[0]])
    return out


def _array(
    schema: dict, rng: random.Random, hints: dict, knobs: Knobs, related: Related | None, name: str, depth: int
) -> list:
    items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
    low = max(int(schema.get("minItems", 0)), knobs.array_min_items)
    high = min(int(schema.get("maxItems", knobs.array_max_items)), max(knobs.array_max_items, low))
    low = min(low, high)
    remembered = related(items) if related and primary_type(items) == "object" else []
    rows = [synthesize(items, rng, {**hints, **record}, knobs, None, "", depth + 1) for record in remembered[:high]]
    target = max(low, rng.randint(low, high)) if high > len(rows) else len(rows)
    while len(rows) < target:
        rows.append(synthesize(items, rng, _item_hints(hints, items), knobs, None, "", depth + 1))
    return rows


def _item_hints(hints: dict, items: dict) -> dict:
    """Argument hints for synthesized list items, minus identifiers (each item is a new record)."""
    return {k: v for k, v in hints.items() if not k.endswith("_id")} if items.get("properties") else hints


def _string(schema: dict, rng: random.Random, name: str) -> str:
    fmt = schema.get("format")
    if fmt == "date":
        return (BASE_DATE + timedelta(days=rng.randint(0, 14))).isoformat()
    if fmt == "email" or name.endswith("email"):
        return f"{rng.choice(WORDS)}.{rng.choice(WORDS)}@example.com"
    if schema.get("pattern"):
        text = pattern_string(schema["pattern"], rng)
        if text is not None:
            return text
    if name == "id" or name.endswith("_id"):
        return _fit_length(_identifier(name, rng), schema)
    example = id_examples().get(name)
    if example is not None and _string_fits(example, schema):  # a plausible value from the catalog
        return example
    return _fit_length(_words(name, rng), schema)


def _identifier(name: str, rng: random.Random) -> str:
    example = id_examples().get(name)
    if example:  # same shape as the catalog's own example ids, digits redrawn
        return re.sub(r"\d", lambda _: str(rng.randint(0, 9)), example)
    return f"{id_prefix(name)}-{rng.randint(1000, 9999)}"


def id_prefix(name: str) -> str:
    """Prefix of new identifiers in a field: the catalog example's, else the field stem's."""
    example = id_examples().get(name, "")
    match = re.match(r"^([A-Za-z]+)-\d+$", example)
    if match:
        return match.group(1)
    stem = (name.removesuffix("_id")) or "obj"
    return stem[:3].upper()


def _words(name: str, rng: random.Random) -> str:
    label = name.replace("_", " ").strip() or "value"
    return f"{label} {rng.choice(WORDS)}"


def _fit_length(text: str, schema: dict) -> str:
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    if len(text) < low:
        text = text + "x" * (low - len(text))
    return text[: int(high)] if high is not None else text


def _integer(schema: dict, rng: random.Random, name: str) -> int:
    low, high = _bounds(schema, 0, 100)
    low, high = math.ceil(low), math.floor(high)
    value = rng.randint(low, max(low, high))
    step = schema.get("multipleOf")
    if isinstance(step, int) and step > 0:
        value = math.ceil(low / step) * step
    return value


def _number(schema: dict, rng: random.Random, name: str) -> float:
    low, high = _bounds(schema, 0.0, 1000.0)
    value = round(rng.uniform(low, high), 2)
    if not low <= value <= high:
        value = low
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        value = (schema["exclusiveMinimum"] + high) / 2
    return value


def _bounds(schema: dict, default_low: float, default_span: float) -> tuple[float, float]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if "exclusiveMinimum" in schema and "minimum" not in schema:
        low = low + (1 if primary_type(schema) == "integer" else 0.01)
    if "exclusiveMaximum" in schema and "maximum" not in schema:
        high = high - (1 if primary_type(schema) == "integer" else 0.01)
    if low is None:
        low = min(default_low, high - default_span) if high is not None else default_low
    if high is None:
        high = low + default_span
    return low, max(low, high)


def _boolean(schema: dict, rng: random.Random, name: str) -> bool:
    return rng.random() < 0.5


_SCALARS = {"integer": _integer, "number": _number, "boolean": _boolean, "string": _string}
