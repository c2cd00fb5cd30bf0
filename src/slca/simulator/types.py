"""Value types of the simulator: the result of one tool call and the tunable knobs.

`ToolResult` is what every backend returns; `Knobs` holds the behaviour switches that calibration
tunes against the real executors (and training loads back from `reports/calibration.json`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

# error classes of the executors plus the two only a raw policy string can cause
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
    "malformed",
    "too_large",
    "backend",
)


@dataclass(frozen=True)
class ToolResult:
    """Outcome of one call: the success payload, or an error message a model can act on."""

    ok: bool
    content: dict | None = None
    error: str | None = None
    error_class: str | None = None
    name: str | None = None  # the tool name when the call could be parsed that far
    source: str = ""  # which backend produced the content ("schema", "llm", "cache", "real", ...)

    @classmethod
    def failure(cls, error_class: str, message: str, name: str | None = None) -> ToolResult:
        return cls(False, None, message, error_class, name, "validation")

    def to_message(self) -> str:
        """Text of the tool message the policy sees inside <tool_response>."""
        payload: Any = self.content if self.ok else {"error": self.error}
        return json.dumps(payload, ensure_ascii=False, sort_keys=False)


@dataclass(frozen=True)
class Knobs:
    """Simulator behaviour switches; the right setting is found by calibration."""

    strict_extra_arguments: bool = True  # reject parameters the schema does not declare
    coerce_numeric_strings: bool = False  # accept "3" where an integer/number is expected
    case_insensitive_enums: bool = False  # accept "Economy" for enum value "economy"
    check_formats: bool = True  # enforce `format` / `pattern` (dates, codes, times)
    check_ranges: bool = True  # enforce minimum/maximum/length/item-count bounds
    echo_arguments: bool = True  # copy argument values into same-named response fields
    track_writes: bool = True  # make records returned earlier in the episode visible to later reads
    new_id_start: int = 9001  # new records get <PREFIX>-<start + k> ids in creation order (0 = random ids)
    array_min_items: int = 1  # synthesized arrays hold at least this many items (schema bounds win)
    array_max_items: int = 3  # ... and at most this many
    max_call_chars: int = 20000  # raw calls longer than this are rejected before parsing
    max_depth: int = 32  # JSON nesting deeper than this is rejected before parsing

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return _KNOB_NAMES

    @classmethod
    def from_mapping(cls, values: Any) -> Knobs:
        """Knobs from a mapping or an object with same-named attributes (e.g. SimulatorParams)."""
        if values is None:
            return cls()
        if isinstance(values, cls):
            return values
        if isinstance(values, dict) and not values:
            return _DEFAULT
        getter = values.get if isinstance(values, dict) else (lambda k, d: getattr(values, k, d))
        if isinstance(values, dict):
            unknown = sorted(set(values) - set(cls.names()))
            if unknown:
                raise ValueError(f"unknown simulator knobs {unknown}; known: {list(cls.names())}")
        defaults = cls()
        return cls(**{name: getter(name, getattr(defaults, name)) for name in cls.names()})

    def replace(self, **changes: Any) -> Knobs:
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


_KNOB_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Knobs))
_DEFAULT = Knobs()
