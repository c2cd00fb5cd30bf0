"""Loose equality of argument values, as the execution reward compares them (DESIGN §1).

Two values are loosely equal when, after normalisation, they match:
- strings are trimmed and lower-cased;
- numbers compare numerically, also when written as strings ("5" == "5.0" == 5);
- booleans match booleans and the strings "true"/"false" (a bool never equals a number);
- dicts and lists compare as sorted JSON of their recursively normalised contents.
"""

from __future__ import annotations

import json
import math
from typing import Any

_BOOL_WORDS = {"true": True, "false": False}


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _BOOL_WORDS.get(value.strip().lower())
    return None


def normalise(value: Any) -> Any:
    """Canonical form: bools stay bools, numbers become floats, strings trimmed/lower-cased."""
    if isinstance(value, bool) or value is None:
        return value
    number = _as_number(value)
    if number is not None:
        return number
    if isinstance(value, str):
        flag = _as_bool(value)
        return flag if flag is not None else value.strip().lower()
    if isinstance(value, dict):
        return {str(k).strip().lower(): normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    return str(value).strip().lower()


def _sorted_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def calls_match(gold: Any, call: Any) -> bool:
    """Same tool name, same argument keys and loosely equal values (`{"name", "arguments"}` dicts)."""
    if gold.get("name") != call.get("name"):
        return False
    expected, given = dict(gold.get("arguments") or {}), dict(call.get("arguments") or {})
    return set(expected) == set(given) and all(loosely_equal(expected[k], given[k]) for k in expected)


def loosely_equal(expected: Any, actual: Any) -> bool:
    """True when `actual` matches `expected` under the rules in the module docstring."""
    a, b = normalise(expected), normalise(actual)
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return _sorted_json(a) == _sorted_json(b)
    return a == b
