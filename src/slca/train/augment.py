"""Copy-forcing augmentation for the SFT warm-up.

A tiny model trained on the synthesized dialogues learns the *distribution* of argument values
(a few cities, account ids and dates recur) instead of copying them from the request: it writes
`"London"` whatever city was asked for. A rewritten example breaks that shortcut: every string
argument value that the dialogue shows before the call (in the user request or an earlier tool
response) is replaced, everywhere outside the system prompt and the tool schemas, by a random
string of the same shape (letters by letters of the same case, digits by digits, the rest kept).
The only way to predict the rewritten value is to copy it.

Values that also occur in the system prompt (today's date) or in the tool schemas (enum members,
formats) are left alone, so relative dates and enums stay meaningful.

    task = copy_augmented(task, random.Random(0))
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Callable, Iterator, Mapping
from typing import Any

#: the task fields a rewrite touches (everything the dialogue shows after the system prompt)
REWRITTEN = ("messages", "gold_steps", "gold_responses", "gold_summary", "reference")
MIN_CHARS = 3


def _string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_leaves(item)


def _pattern(value: str) -> re.Pattern[str]:
    return re.compile(r"(?<![0-9A-Za-z])" + re.escape(value) + r"(?![0-9A-Za-z])")


def same_shape(value: str, rng: random.Random) -> str:
    """A random string with value's shape: A-Z by A-Z, a-z by a-z, 0-9 by 0-9, the rest unchanged."""
    out = []
    for char in value:
        if "A" <= char <= "Z":
            out.append(rng.choice(string.ascii_uppercase))
        elif "a" <= char <= "z":
            out.append(rng.choice(string.ascii_lowercase))
        elif "0" <= char <= "9":
            out.append(rng.choice(string.digits))
        else:
            out.append(char)
    return "".join(out)


def copied_values(task: Mapping[str, Any]) -> list[str]:
    """String argument values the dialogue shows before they are needed (longest first)."""
    messages = task.get("messages") or []
    system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    shown = [" ".join(str(m.get("content") or "") for m in messages if m.get("role") != "system")]
    schemas = json.dumps(task.get("tools") or [], ensure_ascii=False)
    values: set[str] = set()
    responses = task.get("gold_responses") or []
    for index, step in enumerate(task.get("gold_steps") or []):
        context = " ".join(shown)
        for call in step or []:
            for value in _string_leaves(call.get("arguments") or {}):
                if (
                    len(value) >= MIN_CHARS
                    and not any(c in value for c in '"\\')
                    and _pattern(value).search(context)
                    and not _pattern(value).search(system)
                    and value not in schemas
                ):
                    values.add(value)
        if index < len(responses):
            shown.append(json.dumps(responses[index], ensure_ascii=False))
    return sorted(values, key=lambda v: (-len(v), v))


def copy_augmented(task: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """task with every copied value replaced consistently by a random same-shape string."""
    values = copied_values(task)
    if not values:
        return dict(task)
    mapping = {value: same_shape(value, rng) for value in values}
    # one pass over all values at once, so a replacement is never rewritten again
    pattern = re.compile(r"(?<![0-9A-Za-z])(" + "|".join(re.escape(v) for v in values) + r")(?![0-9A-Za-z])")

    def rewrite(text: str) -> str:
        return pattern.sub(lambda match: mapping[match.group(1)], text)

    out = dict(task)
    for field in REWRITTEN:
        if field not in task:
            continue
        if field == "messages":
            out[field] = [
                dict(m) if m.get("role") == "system" else json.loads(rewrite(json.dumps(m, ensure_ascii=False)))
                for m in task[field]
            ]
        else:
            out[field] = json.loads(rewrite(json.dumps(task[field], ensure_ascii=False)))
    return out


def rewrite_share(
    tasks: list[Mapping[str, Any]],
    fraction: float,
    stream: str,
    rewrite: Callable[[Mapping[str, Any], random.Random], dict[str, Any]],
) -> list[Mapping[str, Any]]:
    """The tasks with a seeded `fraction` of them rewritten (same order, same count); `stream` seeds it."""
    if fraction <= 0:
        return list(tasks)
    rng = random.Random(stream)
    return [rewrite(task, rng) if rng.random() < fraction else task for task in tasks]


def augment_tasks(tasks: list[Mapping[str, Any]], fraction: float, seed: int) -> list[Mapping[str, Any]]:
    """The tasks with a seeded `fraction` of them copy-augmented (same order, same count)."""
    return rewrite_share(tasks, fraction, f"copy-augment-{seed}", copy_augmented)


# ---- tool-name augmentation ----
# A policy trained on one catalogue learns its ~35 tool names by heart and writes `triangle_area` where
# the offered function is `calculate_triangle_area` or `geometry.area_triangle`. A renamed example offers
# every tool under another name (and calls it by that name), so the name has to be read from the offer.

NAMESPACES = (
    "api", "app", "calc", "core", "data", "geo", "helper", "lib", "math", "service", "svc", "tools", "util",
    "finance", "travel", "shop", "science", "physics", "info", "my",
)  # fmt: skip
VERBS = ("calculate", "compute", "get", "find", "fetch", "run", "do", "lookup")
#: names that already start with a verb get a suffix instead of a second verb
LEADING_VERBS = {*VERBS, "convert", "create", "delete", "list", "search", "book", "cancel", "place", "return",
                 "transfer", "split", "compare", "update", "add", "remove", "track", "check", "solve"}  # fmt: skip


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def renamed(name: str, rng: random.Random) -> str:
    """Another plausible name for a tool: a namespace or verb prefix, a namespace path, or camelCase."""
    style = rng.randrange(4)
    if style == 0:
        return f"{rng.choice(NAMESPACES)}_{name}"
    if style == 1 and name.split("_")[0] not in LEADING_VERBS:
        return f"{rng.choice(VERBS)}_{name}"
    if style == 1:
        return f"{name}_{rng.choice(('v2', 'tool', 'api', 'fn'))}"
    if style == 2:
        return f"{rng.choice(NAMESPACES)}_{rng.choice(NAMESPACES)}_{name}"
    return _camel(name) if "_" in name else f"{rng.choice(NAMESPACES)}{name[:1].upper()}{name[1:]}"


def rename_augmented(task: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """task with every offered tool under a new name, its gold calls and schema texts to match."""
    tools = task.get("tools") or []
    names = [str((tool.get("function") or tool).get("name")) for tool in tools]
    mapping: dict[str, str] = {}
    for name in names:
        new = renamed(name, rng)
        while new in mapping.values() or new in names:
            new = f"{new}_{rng.randrange(2, 10)}"
        mapping[name] = new
    if not mapping:
        return dict(task)
    pattern = re.compile(
        r"(?<![0-9A-Za-z_])("
        + "|".join(re.escape(n) for n in sorted(mapping, key=len, reverse=True))
        + r")(?![0-9A-Za-z_])"
    )

    def rewrite(value: Any) -> Any:
        return json.loads(pattern.sub(lambda m: mapping[m.group(1)], json.dumps(value, ensure_ascii=False)))

    out = dict(task)
    out["tools"] = rewrite(tools)  # names and any mention of a sibling in a description
    out["gold_steps"] = [
        [{**call, "name": mapping.get(call["name"], call["name"])} for call in step]
        for step in task.get("gold_steps") or []
    ]
    return out


def rename_tasks(tasks: list[Mapping[str, Any]], fraction: float, seed: int) -> list[Mapping[str, Any]]:
    """The tasks with a seeded `fraction` of them offering their tools under new names (same order, count)."""
    return rewrite_share(tasks, fraction, f"rename-augment-{seed}", rename_augmented)
