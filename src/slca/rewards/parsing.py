"""The shared parser for `<tool_call>` blocks written by the policy (Qwen2.5 style).

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Lima"}}
    </tool_call>

`parse_tool_calls(text, known_tools=None)` never raises. It returns
- `n_blocks` = max(#open tags, #close tags), the denominator of the format score;
- `calls`: every closed block whose body is one JSON object with a string "name" and an
  "arguments" dict (a JSON string holding a dict is accepted too), as {"name", "arguments"} in
  order. Calls to tools outside `known_tools` are listed — they are wrong predictions that
  scoring must see — but not counted valid;
- `n_valid`: blocks that are JSON, name a known tool (any name when `known_tools` is None) and
  carry a dict of arguments (DESIGN §1). An unclosed block is never valid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
_CLOSED_BLOCK = re.compile(re.escape(OPEN_TAG) + r"(.*?)" + re.escape(CLOSE_TAG), re.DOTALL)


@dataclass(frozen=True)
class ParsedCalls:
    """Calls found in one text, with the counts the format score needs."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    n_valid: int = 0
    n_blocks: int = 0
    unknown: list[str] = field(default_factory=list)  # names of listed calls to unknown tools


def parse_call_body(body: str) -> dict[str, Any] | None:
    """{"name", "arguments"} from one block body, or None when it is not a well-formed call."""
    try:
        obj = json.loads(body.strip())
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"].strip():
        return None
    arguments = obj.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError):
            return None
    if not isinstance(arguments, dict):
        return None
    return {"name": obj["name"].strip(), "arguments": arguments}


def parse_tool_calls(text: Any, known_tools: Collection[str] | None = None) -> ParsedCalls:
    """Parse every `<tool_call>` block of `text` (see the module docstring)."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    n_blocks = max(text.count(OPEN_TAG), text.count(CLOSE_TAG))
    calls: list[dict[str, Any]] = []
    unknown: list[str] = []
    n_valid = 0
    for match in _CLOSED_BLOCK.finditer(text):
        # a nested open tag means the previous block was never closed: parse the innermost one
        body = match.group(1).rsplit(OPEN_TAG, 1)[-1]
        call = parse_call_body(body)
        if call is None:
            continue
        calls.append(call)
        if known_tools is None or call["name"] in known_tools:
            n_valid += 1
        else:
            unknown.append(call["name"])
    return ParsedCalls(calls=calls, n_valid=n_valid, n_blocks=n_blocks, unknown=unknown)
