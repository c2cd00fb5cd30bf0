"""Tool definitions as the simulator sees them: normalised, with per-knob parameter schemas.

Accepts catalog schemas (`name`, `description`, `parameters`, `response`) and OpenAI tools entries
(`{"type": "function", "function": {...}}`); an OpenAI entry borrows its response schema from the
catalog when the name is known there, else any JSON object is a conforming response.
"""

from __future__ import annotations

import copy
import json
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

from slca.simulator.clock import BASE_DATE
from slca.simulator.fastcheck import Checker, compile_checker

GENERIC_RESPONSE: dict = {"type": "object"}
MAX_CACHED_SPECS = 2048
WRITE_VERBS = (
    "add",
    "book",
    "cancel",
    "change",
    "create",
    "delete",
    "make",
    "modify",
    "move",
    "pay",
    "place",
    "remove",
    "request",
    "reschedule",
    "reserve",
    "return",
    "schedule",
    "send",
    "set",
    "submit",
    "transfer",
    "update",
    "decline",
    "accept",
    "invite",
)
RANGE_KEYWORDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "multipleOf",
)
FORMAT_KEYWORDS = ("format", "pattern")
_SPECS: OrderedDict[str, ToolSpec | None] = OrderedDict()
_EXAMPLE = re.compile(r"e\.g\.\s*'([^']+)'")
_DEFAULT = re.compile(r"\bdefaults? (?:to |is )?'?([A-Za-z0-9_.:-]+?)'?[.;,)]?(?:\s|$)")


@dataclass
class ToolSpec:
    """One tool: its schemas plus lazily compiled derived forms."""

    name: str
    description: str
    parameters: dict
    response: dict
    writes: bool
    defaults: dict = field(default_factory=dict)  # documented values of omitted parameters
    _relaxed: dict = field(default_factory=dict, repr=False)
    _checkers: dict = field(default_factory=dict, repr=False)
    _response_validator: Draft202012Validator | None = field(default=None, repr=False)

    def as_schema(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            "response": self.response,
        }

    def parameters_for(self, check_formats: bool, check_ranges: bool) -> dict:
        """Parameter schema with the bound/format keywords the knobs switch off removed."""
        key = (check_formats, check_ranges)
        if key not in self._relaxed:
            drop = (() if check_formats else FORMAT_KEYWORDS) + (() if check_ranges else RANGE_KEYWORDS)
            self._relaxed[key] = {"name": self.name, "parameters": strip_keywords(self.parameters, drop)}
        return self._relaxed[key]

    def fast_checker(self, check_formats: bool, check_ranges: bool) -> Checker | None:
        """Compiled conservative checker of the relaxed parameter schema (None = unsupported)."""
        key = (check_formats, check_ranges)
        if key not in self._checkers:
            self._checkers[key] = compile_checker(self.parameters_for(*key)["parameters"])
        return self._checkers[key]

    def response_errors(self, content: Any) -> list[str]:
        """Messages of every way `content` breaks the response schema (empty = conforms)."""
        if self._response_validator is None:
            self._response_validator = Draft202012Validator(
                self.response, format_checker=Draft202012Validator.FORMAT_CHECKER
            )
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:120]}"
            for e in self._response_validator.iter_errors(content)
        ]


def strip_keywords(schema: Any, drop: tuple[str, ...]) -> Any:
    """Deep copy of a schema without the given keywords (property names are kept)."""
    if isinstance(schema, list):
        return [strip_keywords(item, drop) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in drop:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: strip_keywords(sub, drop) for name, sub in value.items()}
        else:
            out[key] = strip_keywords(value, drop)
    return out


def is_write_tool(name: str) -> bool:
    return name.split("_", 1)[0].lower() in WRITE_VERBS


@lru_cache(maxsize=1)
def catalog_map() -> dict[str, dict]:
    """The tool catalog by name (read once; empty if the catalog cannot be imported)."""
    try:
        from slca.tools import tool_map
    except ImportError:
        return {}
    return tool_map()


@lru_cache(maxsize=1)
def id_examples() -> dict[str, str]:
    """Example values per parameter name from catalog descriptions ("... e.g. 'BKG-9001'")."""
    examples: dict[str, str] = {}
    for schema in catalog_map().values():
        for pname, sub in schema.get("parameters", {}).get("properties", {}).items():
            match = _EXAMPLE.search(str(sub.get("description", ""))) if isinstance(sub, dict) else None
            if match:
                examples.setdefault(pname, match.group(1))
    return examples


def to_spec(entry: Any) -> ToolSpec | None:
    """ToolSpec of a catalog schema or OpenAI tools entry; None when it is not a tool definition."""
    if not isinstance(entry, dict):
        return None
    if isinstance(entry.get("function"), dict):
        entry = entry["function"]
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        return None
    parameters = entry.get("parameters")
    if not isinstance(parameters, dict):
        parameters = {"type": "object", "properties": {}}
    response = entry.get("response")
    if not isinstance(response, dict):
        response = catalog_map().get(name, {}).get("response", GENERIC_RESPONSE)
    return ToolSpec(
        name=name,
        description=str(entry.get("description", "")),
        parameters=copy.deepcopy(parameters),
        response=copy.deepcopy(response),
        writes=is_write_tool(name),
        defaults=documented_defaults(parameters),
    )


def documented_defaults(parameters: dict) -> dict:
    """Values parameters take when omitted: `default`, or "defaults to X" in the description."""
    out = {}
    for name, sub in parameters.get("properties", {}).items():
        if not isinstance(sub, dict):
            continue
        if "default" in sub:
            out[name] = sub["default"]
            continue
        match = _DEFAULT.search(str(sub.get("description", "")))
        value = _typed_default(match.group(1), sub) if match else None
        if value is not None:
            out[name] = value
    return out


def _typed_default(text: str, schema: dict) -> Any:
    """The default text as a value of the parameter's type, or None when it is not one."""
    kind = schema.get("type")
    checker = compile_checker(schema)
    if kind == "string" and schema.get("format") == "date" and text == "today":
        value: Any = BASE_DATE.isoformat()
    elif kind == "boolean" and text in ("true", "false"):
        value = text == "true"
    elif kind in ("integer", "number"):
        try:
            value = int(text) if kind == "integer" else float(text)
        except ValueError:
            return None
    elif kind == "string":
        value = text
    else:
        return None
    return value if checker is not None and checker(value) else None


@lru_cache(maxsize=1)
def _catalog_specs() -> dict[str, ToolSpec]:
    """Specs of the whole catalog, built once (their compiled caches are shared)."""
    return toolset(list(catalog_map().values()))


def toolset(tools: Any) -> dict[str, ToolSpec]:
    """Name -> spec for None (the whole catalog), one definition, or a list of definitions."""
    if tools is None:
        return dict(_catalog_specs())
    if isinstance(tools, dict) and tools and all(isinstance(v, ToolSpec) for v in tools.values()):
        return dict(tools)  # already built (shared compiled caches)
    if isinstance(tools, dict):
        entries: list = [tools]
    else:
        entries = list(tools)
    specs = (cached_spec(entry) for entry in entries)
    return {spec.name: spec for spec in specs if spec is not None}


def cached_spec(entry: Any) -> ToolSpec | None:
    """to_spec, shared across episodes offering the same definition (compiled caches reused, and
    the catalog validator's per-schema cache stays bounded)."""
    try:
        key = json.dumps(entry, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return to_spec(entry)
    hit = _SPECS.get(key)
    if hit is None:
        hit = to_spec(entry)
        _SPECS[key] = hit
        if len(_SPECS) > MAX_CACHED_SPECS:
            _SPECS.popitem(last=False)
    return hit
