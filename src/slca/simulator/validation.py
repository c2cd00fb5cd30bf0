"""The validation layer in front of the simulated backends.

Argument checking is the catalog's own (`slca.tools.validate_arguments`, Draft 2020-12 with the same
error classes and messages as the real executors); the knobs act around it: lenient knobs rewrite
arguments first (coerce numeric strings, fold enum case, drop undeclared keys) and the check knobs
validate against a schema with format/range keywords removed.
"""

from __future__ import annotations

import math
import re
from typing import Any

from slca.simulator.specs import ToolSpec
from slca.simulator.types import Knobs, ToolResult
from slca.tools.validation import validate_arguments

_INTEGER = re.compile(r"\s*[+-]?\d{1,18}\s*")


def check_arguments(spec: ToolSpec, arguments: dict, knobs: Knobs) -> tuple[dict, ToolResult | None]:
    """(arguments as the backend should see them, error result or None)."""
    arguments = normalize_arguments(spec.parameters, arguments, knobs)
    fast = spec.fast_checker(knobs.check_formats, knobs.check_ranges)
    if fast is not None and fast(arguments):
        return arguments, None
    relaxed = spec.parameters_for(knobs.check_formats, knobs.check_ranges)
    problem = validate_arguments(relaxed, arguments)
    if problem is None:
        return arguments, None
    error_class, message = problem
    return arguments, ToolResult(False, None, message, error_class, spec.name, "validation")


def normalize_arguments(schema: dict, value: Any, knobs: Knobs) -> Any:
    """Apply the lenient knobs to a value against its schema (returns a new value when changed)."""
    if not (knobs.coerce_numeric_strings or knobs.case_insensitive_enums or not knobs.strict_extra_arguments):
        return value
    return _normalize(schema, value, knobs)


def _types(schema: dict) -> tuple[str, ...]:
    kind = schema.get("type")
    return tuple(kind) if isinstance(kind, list) else ((kind,) if isinstance(kind, str) else ())


def _normalize(schema: Any, value: Any, knobs: Knobs) -> Any:
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict) and "object" in _types(schema):
        return _normalize_object(schema, value, knobs)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_normalize(schema["items"], item, knobs) for item in value]
    if isinstance(value, str):
        return _normalize_string(schema, value, knobs)
    return value


def _normalize_object(schema: dict, value: dict, knobs: Knobs) -> dict:
    properties = schema.get("properties", {})
    out = {}
    for key, item in value.items():
        if key not in properties:
            if knobs.strict_extra_arguments or schema.get("additionalProperties", True) is not False:
                out[key] = item
            continue
        out[key] = _normalize(properties[key], item, knobs)
    return out


def _normalize_string(schema: dict, value: str, knobs: Knobs) -> Any:
    types = _types(schema)
    if knobs.coerce_numeric_strings and "string" not in types:
        if "integer" in types and _INTEGER.fullmatch(value):
            return int(value)
        if "number" in types:
            number = _as_float(value)
            if number is not None:
                return int(number) if number.is_integer() and _INTEGER.fullmatch(value) else number
    if knobs.case_insensitive_enums and isinstance(schema.get("enum"), list):
        folded = value.strip().casefold()
        for option in schema["enum"]:
            if isinstance(option, str) and option.casefold() == folded:
                return option
    return value


def _as_float(text: str) -> float | None:
    if len(text) > 40:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
