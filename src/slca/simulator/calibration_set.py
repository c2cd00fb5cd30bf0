"""The calibration set: gold calls of the validation split plus systematic perturbations of them.

Each item replays its row's earlier gold calls (so writes the target depends on exist), then makes
the target call: the gold call itself, or one perturbation — a missing required argument, an
undeclared argument, a wrong type, a numeric string, an enum in the wrong case, a value outside the
enum, a number out of range, a malformed date/pattern, or a tool name that does not exist. Which
perturbations apply depends on the call's schema; they rotate so every kind is represented.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slca.simulator.specs import ToolSpec, toolset

Perturb = Callable[[dict, ToolSpec, random.Random], dict | None]


@dataclass(frozen=True)
class CalibItem:
    row_id: str
    tools: list  # the tools the row offers (OpenAI entries)
    prefix: tuple  # earlier gold calls of the row, replayed first
    call: dict  # the call under test {"name", "arguments"}
    kind: str  # "gold" or the perturbation applied


def read_rows(path: Path | str) -> list[dict]:
    """Task rows of a JSONL split file; one clear error if it is missing or broken."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found; run `slca synthesize` first (calibration reads the validation split)"
        )
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                raise ValueError(f"{path}:{number}: not a JSON line; rerun `slca synthesize`") from None
    return rows


def build_items(rows: list[dict], n_calls: int, perturbations_per_call: int, seed: int) -> list[CalibItem]:
    """Up to `n_calls` gold calls (rows in seeded order) with their perturbations."""
    rng = random.Random(f"calibration|{seed}")
    order = list(rows)
    rng.shuffle(order)
    items: list[CalibItem] = []
    used: Counter[str] = Counter()
    n_gold = 0
    for row in order:
        specs = toolset(row.get("tools", []))
        done: list[dict] = []
        for step in row.get("gold_steps", []):
            for call in step:
                if n_gold >= n_calls:
                    return items
                n_gold += 1
                items.append(CalibItem(row["id"], row["tools"], tuple(done), call, "gold"))
                spec = specs.get(call["name"])
                if spec is not None:
                    items.extend(perturbed_items(row, tuple(done), call, spec, perturbations_per_call, used, rng))
                done.append(call)
    return items


def perturbed_items(
    row: dict, prefix: tuple, call: dict, spec: ToolSpec, count: int, used: Counter, rng: random.Random
) -> list[CalibItem]:
    """`count` applicable perturbations, least-used kinds first (rare kinds get every chance)."""
    order = sorted(PERTURBATIONS, key=lambda name: (used[name], rng.random()))
    out = []
    for name in order:
        if len(out) >= count:
            break
        changed = PERTURBATIONS[name](json.loads(json.dumps(call)), spec, rng)
        if changed is not None:
            used[name] += 1
            out.append(CalibItem(row["id"], row["tools"], prefix, changed, name))
    return out


def _properties(spec: ToolSpec) -> dict:
    return spec.parameters.get("properties", {})


def _present(call: dict, spec: ToolSpec, test: Callable[[dict, object], bool]) -> list[str]:
    """Argument names present in the call whose schema and value pass `test`."""
    props = _properties(spec)
    return sorted(k for k, v in call["arguments"].items() if isinstance(props.get(k), dict) and test(props[k], v))


def missing_required(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    required = [k for k in spec.parameters.get("required", []) if k in call["arguments"]]
    if not required:
        return None
    del call["arguments"][rng.choice(required)]
    return call


def extra_argument(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    call["arguments"][rng.choice(["note", "priority", "verbose", "session_id"])] = rng.choice(["x", 1, True])
    return call


def wrong_type(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    keys = _present(call, spec, lambda schema, value: isinstance(schema.get("type"), str))
    if not keys:
        return None
    key = rng.choice(keys)
    kind = _properties(spec)[key]["type"]
    call["arguments"][key] = {
        "string": 12345,
        "integer": "many",
        "number": "lots",
        "boolean": "yes",
        "array": "several",
        "object": "details",
    }.get(kind)
    return call


def numeric_string(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    keys = _present(
        call,
        spec,
        lambda schema, value: (
            schema.get("type") in ("integer", "number")
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
        ),
    )
    if not keys:
        return None
    key = rng.choice(keys)
    call["arguments"][key] = str(call["arguments"][key])
    return call


def enum_case(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    keys = _present(
        call,
        spec,
        lambda schema, value: (
            isinstance(schema.get("enum"), list) and isinstance(value, str) and value.upper() != value
        ),
    )
    if not keys:
        return None
    key = rng.choice(keys)
    call["arguments"][key] = call["arguments"][key].upper()
    return call


def out_of_enum(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    keys = _present(call, spec, lambda schema, value: isinstance(schema.get("enum"), list))
    if not keys:
        return None
    call["arguments"][rng.choice(keys)] = rng.choice(["other", "unknown", "standard_plus"])
    return call


def out_of_range(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    keys = _present(
        call,
        spec,
        lambda schema, value: (
            ("maximum" in schema or "minimum" in schema)
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
        ),
    )
    if not keys:
        return None
    key = rng.choice(keys)
    schema = _properties(spec)[key]
    call["arguments"][key] = schema["maximum"] + 1 if "maximum" in schema else schema["minimum"] - 1
    return call


def bad_format(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    keys = _present(
        call, spec, lambda schema, value: ("format" in schema or "pattern" in schema) and isinstance(value, str)
    )
    if not keys:
        return None
    key = rng.choice(keys)
    value = call["arguments"][key]
    fmt = _properties(spec)[key].get("format")
    if fmt == "date" and len(value) == 10:
        call["arguments"][key] = f"{value[8:10]}/{value[5:7]}/{value[0:4]}"  # DD/MM/YYYY
    elif fmt == "email":
        call["arguments"][key] = value.replace("@", " at ") if "@" in value else value
    else:
        call["arguments"][key] = f"{value}?"
    return call


def wrong_tool(call: dict, spec: ToolSpec, rng: random.Random) -> dict | None:
    verb, _, rest = call["name"].partition("_")
    call["name"] = f"{rest}_{verb}" if rest else f"{verb}_v2"
    return call


PERTURBATIONS: dict[str, Perturb] = {
    "missing_required": missing_required,
    "extra_argument": extra_argument,
    "wrong_type": wrong_type,
    "numeric_string": numeric_string,
    "enum_case": enum_case,
    "out_of_enum": out_of_enum,
    "out_of_range": out_of_range,
    "bad_format": bad_format,
    "wrong_tool": wrong_tool,
}
