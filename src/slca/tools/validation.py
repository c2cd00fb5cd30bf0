"""Validate tool-call arguments against a tool's parameter schema (JSON Schema Draft 2020-12).

`validate_arguments(tool_schema, arguments)` returns None when the call is valid, else
`(error_class, message)` with error_class one of missing_required, unexpected_argument, type,
enum, range, format, and a one-line message that tells a model exactly what to fix.
"""

from __future__ import annotations

import json
import math
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

ERROR_ORDER = ("missing_required", "unexpected_argument", "type", "enum", "range", "format")
_CLASS_OF = {
    "required": "missing_required",
    "additionalProperties": "unexpected_argument",
    "type": "type",
    "enum": "enum",
    "const": "enum",
    "minimum": "range",
    "maximum": "range",
    "exclusiveMinimum": "range",
    "exclusiveMaximum": "range",
    "minItems": "range",
    "maxItems": "range",
    "minLength": "range",
    "maxLength": "range",
    "multipleOf": "range",
    "uniqueItems": "range",
    "format": "format",
    "pattern": "format",
}
_FORMAT_HINT = {
    "date": "a date in YYYY-MM-DD format",
    "email": "an email address like name@example.com",
    "time": "a time like 14:30:00Z",
}
_JSON_TYPE = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}
_VALIDATORS: dict[int, tuple[dict, Draft202012Validator]] = {}


def names(items: list[str]) -> str:
    """Parameter or field names for an error text, bare and comma-separated.

    Error texts reach the policy inside a JSON tool response; a name quoted Python-style
    (`'account_id'`) is copied into the next call as `"account_id',` and breaks its JSON, so
    tool-facing texts never quote names.
    """
    return ", ".join(str(item) for item in items)


def missing_required_message(name: str, missing: list[str]) -> str:
    return f"Tool {name} missing required parameters: {names(missing)}"


def unknown_tool_message(name: Any) -> str:
    return f"Tool {name} not found in the current available tools set."


def validate_arguments(tool_schema: dict, arguments: Any) -> tuple[str, str] | None:
    """First schema violation of `arguments` as (error_class, message); None if valid."""
    name = tool_schema.get("name", "?")
    parameters = tool_schema.get("parameters", tool_schema)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return "type", (
            f"Tool {name} arguments must be a JSON object of parameter names to "
            f"values, got {json_type(arguments)} {show(arguments)}"
        )
    missing = [k for k in parameters.get("required", []) if k not in arguments]
    if missing:
        return "missing_required", missing_required_message(name, missing)
    bad_number = _non_finite(arguments)
    if bad_number is not None:
        return "type", f"Tool {name} parameter {bad_number[0]} must be a finite number, got {bad_number[1]}"
    errors = list(_validator(parameters).iter_errors(arguments))
    if not errors:
        return None
    error = min(errors, key=lambda e: (_rank(e), [str(p) for p in e.absolute_path]))
    return _CLASS_OF.get(error.validator, "type"), describe(name, error)


def coerce_integers(schema: dict, value: Any) -> Any:
    """Turn integral floats (3.0) into ints where the schema says integer; valid input assumed."""
    kind = schema.get("type")
    if kind == "integer" and isinstance(value, float):
        return int(value)
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: coerce_integers(props[k], v) if k in props else v for k, v in value.items()}
    if kind == "array" and isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [coerce_integers(schema["items"], v) for v in value]
    return value


def _non_finite(value: Any, where: str = "") -> tuple[str, str] | None:
    """Path and text of the first NaN/Infinity inside the arguments (JSON Schema bounds let NaN pass)."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, str(value)
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, sub in items:
        path = f"{where}[{key}]" if isinstance(key, int) else (f"{where}.{key}" if where else str(key))
        hit = _non_finite(sub, path)
        if hit is not None:
            return hit
    return None


def json_type(value: Any) -> str:
    return _JSON_TYPE.get(type(value), type(value).__name__)


def show(value: Any, limit: int = 60) -> str:
    """Compact JSON rendering of a value for error messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(name: str, error: ValidationError) -> str:
    """One-line, fixable description of a single jsonschema error."""
    where = _path(error)
    subject = f"Tool {name} parameter {where}" if where else f"Tool {name}"
    kind, limit, got = error.validator, error.validator_value, error.instance
    if kind == "required":
        missing = [k for k in limit if isinstance(got, dict) and k not in got]
        return f"{subject} missing required fields: {names(missing)}"
    if kind == "additionalProperties":
        allowed = list(error.schema.get("properties", {}))
        extra = sorted(k for k in got if k not in allowed) if isinstance(got, dict) else []
        noun = "parameters" if not where else "fields"
        return f"{subject} got unexpected {noun}: {names(extra)}; allowed {noun}: {names(allowed)}"
    if kind == "type":
        want = " or ".join(limit) if isinstance(limit, list) else limit
        return f"{subject} must be of type {want}, got {json_type(got)} {show(got)}"
    if kind in ("enum", "const"):
        options = limit if kind == "enum" else [limit]
        return f"{subject} must be one of {show(options, 400)}, got {show(got)}"
    if kind in ("format", "pattern"):
        want = (
            _FORMAT_HINT.get(limit, f"a valid {limit}")
            if kind == "format"
            else error.schema.get("description") or f"a string matching {limit}"
        )
        want = want.replace("'", "")  # descriptions quote their examples ('CUS-1001'); see names()
        return f"{subject} must be {want.rstrip('.')}, got {show(got)}"
    return f"{subject} {_range_phrase(kind, limit)}, got {_range_value(kind, got)}"


def _range_phrase(kind: str, limit: Any) -> str:
    return {
        "minimum": f"must be >= {limit}",
        "maximum": f"must be <= {limit}",
        "exclusiveMinimum": f"must be > {limit}",
        "exclusiveMaximum": f"must be < {limit}",
        "minItems": f"must have at least {limit} items",
        "maxItems": f"must have at most {limit} items",
        "minLength": f"must be at least {limit} characters long",
        "maxLength": f"must be at most {limit} characters long",
        "multipleOf": f"must be a multiple of {limit}",
        "uniqueItems": "must not repeat items",
    }.get(kind, f"violates {kind}={limit}")


def _range_value(kind: str, got: Any) -> str:
    if kind == "uniqueItems":
        return show(got)
    if kind in ("minItems", "maxItems"):
        return f"{len(got)} items"
    if kind in ("minLength", "maxLength"):
        return f"{len(got)} characters"
    return show(got)


def _path(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _rank(error: ValidationError) -> int:
    cls = _CLASS_OF.get(error.validator, "type")
    return ERROR_ORDER.index(cls)


def _validator(parameters: dict) -> Draft202012Validator:
    """Compiled validator per parameter schema object (kept alive alongside it)."""
    hit = _VALIDATORS.get(id(parameters))
    if hit is None or hit[0] is not parameters:
        hit = (parameters, Draft202012Validator(parameters, format_checker=Draft202012Validator.FORMAT_CHECKER))
        _VALIDATORS[id(parameters)] = hit
    return hit[1]
