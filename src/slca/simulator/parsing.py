"""Turn whatever the policy wrote inside `<tool_call>` into (name, arguments) — or a clean error.

Sizes and nesting depth are capped *before* `json.loads`, so a huge or adversarially nested payload
costs a length check, not a parse. Nothing here raises on any string or object.

    parse_call('{"name": "get_weather", "arguments": {"city": "Lima"}}', max_chars=20000, max_depth=32)
    -> ParsedCall(name="get_weather", arguments={"city": "Lima"})
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from slca.simulator.types import ToolResult

MAX_NAME_CHARS = 128
CALL_SHAPE = 'Expected {"name": "<tool name>", "arguments": {...}}.'
_TAGS = re.compile(r"</?tool_call>", re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z0-9_-]*\s*|\s*```$")


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict


def canonical_json(value: Any) -> str:
    """Stable text of a JSON value (sorted keys, no spaces) for hashing and cache keys."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a valid JSON number")


def loads_capped(text: str, max_chars: int, max_depth: int) -> tuple[Any, ToolResult | None]:
    """json.loads with size and depth checked first; NaN/Infinity rejected."""
    if len(text) > max_chars:
        return None, ToolResult.failure(
            "too_large", f"Tool call is too large ({len(text)} characters; the limit is {max_chars})."
        )
    if text.count("{") + text.count("[") > max_depth and json_depth(text) > max_depth:
        return None, ToolResult.failure("too_large", f"Tool call JSON is nested deeper than {max_depth} levels.")
    try:
        return json.loads(text, parse_constant=_reject_constant), None
    except (ValueError, RecursionError) as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
        where = f" at character {error.pos}" if isinstance(error, json.JSONDecodeError) else ""
        return None, ToolResult.failure(
            "malformed", f"Tool call is not valid JSON ({clip(reason, 80)}{where}). {CALL_SHAPE}"
        )


def json_depth(text: str) -> int:
    """Deepest bracket nesting outside string literals (only run when a cheap bound fails)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "}]":
            depth -= 1
    return deepest


def value_depth(value: Any, limit: int) -> int:
    """Nesting depth of an in-memory value, stopping once it passes `limit`."""
    stack = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def strip_wrappers(text: str) -> str:
    """Drop surrounding <tool_call> tags and Markdown code fences the policy may have kept."""
    text = text.strip()
    if text.startswith("<") or "</tool_call" in text[-16:]:
        text = _TAGS.sub("", text).strip()
    if text.startswith("`"):
        text = _FENCE.sub("", text).strip()
    return text


def parse_call(call: Any, *, max_chars: int, max_depth: int) -> ParsedCall | ToolResult:
    """(name, arguments) of a raw call string or an already-parsed dict; never raises."""
    try:
        return _parse(call, max_chars, max_depth)
    except Exception as error:  # noqa: BLE001 - last line of defence: odd objects passed by callers
        return ToolResult.failure("malformed", f"Tool call could not be read ({type(error).__name__}). {CALL_SHAPE}")


def _parse(call: Any, max_chars: int, max_depth: int) -> ParsedCall | ToolResult:
    if isinstance(call, (bytes, bytearray)):
        call = bytes(call[: max_chars * 4 + 1]).decode("utf-8", errors="replace")
    if isinstance(call, str):
        if len(call) > max_chars * 2:  # cheap guard before any regex runs over it
            return ToolResult.failure(
                "too_large", f"Tool call is too large ({len(call)} characters; the limit is {max_chars})."
            )
        text = strip_wrappers(call)
        if not text:
            return ToolResult.failure("malformed", f"Tool call is empty. {CALL_SHAPE}")
        call, problem = loads_capped(text, max_chars, max_depth)
        if problem is not None:
            return problem
    elif isinstance(call, dict) and value_depth(call, max_depth) > max_depth:
        return ToolResult.failure("too_large", f"Tool call JSON is nested deeper than {max_depth} levels.")
    if not isinstance(call, dict):
        kind = type(call).__name__ if not isinstance(call, list) else "array"
        return ToolResult.failure("malformed", f"Tool call must be a JSON object, got {kind}. {CALL_SHAPE}")
    if isinstance(call.get("function"), dict):  # OpenAI-style {"type": "function", "function": {...}}
        call = call["function"]
    return _name_and_arguments(call, max_chars, max_depth)


def _name_and_arguments(call: dict, max_chars: int, max_depth: int) -> ParsedCall | ToolResult:
    name = call.get("name")
    if not isinstance(name, str) or not name.strip():
        return ToolResult.failure("malformed", f"Tool call needs a non-empty string 'name'. {CALL_SHAPE}")
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        return ToolResult.failure("too_large", f"Tool name is too long ({len(name)} characters).")
    arguments = call.get("arguments", {})
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):  # OpenAI-style arguments encoded as a JSON string
        arguments, problem = loads_capped(arguments.strip() or "{}", max_chars, max_depth)
        if problem is not None:
            return ToolResult(False, None, problem.error, problem.error_class, name, "validation")
    if not isinstance(arguments, dict):
        kind = "array" if isinstance(arguments, list) else type(arguments).__name__
        return ToolResult.failure(
            "malformed",
            (f"Tool {clip(name)} arguments must be a JSON object of parameter names to values, got {kind}."),
            name,
        )
    try:
        size = len(canonical_json(arguments))
    except (TypeError, ValueError):
        return ToolResult.failure("malformed", f"Tool {clip(name)} arguments are not JSON values.", name)
    if size > max_chars:
        return ToolResult.failure(
            "too_large",
            (f"Tool {clip(name)} arguments are too large ({size} characters; the limit is {max_chars})."),
            name,
        )
    return ParsedCall(name, arguments)
