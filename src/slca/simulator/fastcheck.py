"""A compiled, conservative JSON-schema checker for the hot path.

`compile_checker(schema)` turns the keyword subset the catalog uses into nested closures; it
returns None for schemas using anything else. A checker answering True guarantees jsonschema would
accept the value (it is at least as strict); False means "ask jsonschema", which then produces the
exact error class and message. Valid calls — most of a rollout's — skip jsonschema entirely.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import date
from typing import Any

Checker = Callable[[Any], bool]
ANNOTATIONS = {"description", "title", "default", "examples", "$comment"}
SUPPORTED = ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$", re.ASCII)


class Unsupported(Exception):
    pass


def compile_checker(schema: Any) -> Checker | None:
    try:
        return _compile(schema)
    except (Unsupported, re.error, TypeError, ValueError):
        return None


def _compile(schema: Any) -> Checker:
    if schema is True or schema == {}:
        return lambda value: True
    if not isinstance(schema, dict) or set(schema) - SUPPORTED:
        raise Unsupported(str(schema)[:80])
    checks = [
        check
        for check in (_type(schema), _enum(schema), _numeric(schema), _string(schema), _array(schema), _object(schema))
        if check is not None
    ]
    if len(checks) == 1:
        return checks[0]
    return lambda value: all(check(value) for check in checks)


def _is_type(kind: str) -> Checker:
    if kind == "integer":
        return lambda v: type(v) is int
    if kind == "number":
        return lambda v: type(v) is int or (type(v) is float and math.isfinite(v))
    expected = {"string": str, "boolean": bool, "array": list, "object": dict, "null": type(None)}.get(kind)
    if expected is None:
        raise Unsupported(kind)
    return lambda v: type(v) is expected


def _type(schema: dict) -> Checker | None:
    kind = schema.get("type")
    if kind is None:
        return None
    kinds = [_is_type(k) for k in (kind if isinstance(kind, list) else [kind])]
    return kinds[0] if len(kinds) == 1 else (lambda v: any(k(v) for k in kinds))


def _enum(schema: dict) -> Checker | None:
    options = schema["enum"] if "enum" in schema else ([schema["const"]] if "const" in schema else None)
    if options is None:
        return None
    if not all(isinstance(o, (str, int, float, bool)) or o is None for o in options):
        raise Unsupported("enum of containers")
    return lambda v: any(type(o) is type(v) and o == v for o in options)


def _numeric(schema: dict) -> Checker | None:
    bounds = [
        (key, schema[key]) for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if key in schema
    ]
    if not bounds:
        return None
    tests = {
        "minimum": lambda v, b: v >= b,
        "maximum": lambda v, b: v <= b,
        "exclusiveMinimum": lambda v, b: v > b,
        "exclusiveMaximum": lambda v, b: v < b,
    }

    def check(value: Any) -> bool:
        if type(value) not in (int, float):
            return True  # bounds do not apply to non-numbers
        return all(tests[key](value, bound) for key, bound in bounds)

    return check


def _string(schema: dict) -> Checker | None:
    low, high = schema.get("minLength", 0), schema.get("maxLength", math.inf)
    pattern = re.compile(schema["pattern"]) if "pattern" in schema else None
    fmt = schema.get("format")
    if fmt not in (None, "date", "email"):
        raise Unsupported(f"format {fmt}")
    if low == 0 and high == math.inf and pattern is None and fmt is None:
        return None

    def check(value: Any) -> bool:
        if type(value) is not str:
            return True
        if not low <= len(value) <= high or (pattern is not None and not pattern.search(value)):
            return False
        if fmt == "date":
            return _valid_date(value)
        return fmt != "email" or "@" in value

    return check


def _valid_date(text: str) -> bool:
    if not _DATE.fullmatch(text):
        return False
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _array(schema: dict) -> Checker | None:
    items = _compile(schema["items"]) if "items" in schema else None
    low, high = schema.get("minItems", 0), schema.get("maxItems", math.inf)
    unique = schema.get("uniqueItems", False) is True
    if items is None and low == 0 and high == math.inf and not unique:
        return None

    def check(value: Any) -> bool:
        if type(value) is not list:
            return True
        if not low <= len(value) <= high or (unique and not _all_distinct(value)):
            return False
        return items is None or all(items(item) for item in value)

    return check


def _all_distinct(values: list) -> bool:
    """True only when items are hashable scalars with no two equal (1 and 1.0 count as equal)."""
    try:
        return len(set(values)) == len(values) and not any(isinstance(v, bool) for v in values)
    except TypeError:
        return False


def _object(schema: dict) -> Checker | None:
    properties = {key: _compile(sub) for key, sub in schema.get("properties", {}).items()}
    required = list(schema.get("required", []))
    extra = schema.get("additionalProperties", True)
    if extra not in (True, False):
        raise Unsupported("additionalProperties schema")
    if not properties and not required and extra is True:
        return None

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return True
        for key in required:
            if key not in value:
                return False
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None:
                if extra is False:
                    return False
            elif not sub(item):
                return False
        return True

    return check
