"""The facts a summary should state, read from the tool responses the policy actually observed.

A task's `reference` facts were rendered from the real executors' responses (`gold_responses`)
when the task was synthesized. A rollout's responses can differ: under the training simulator a
call that is not the gold call gets a synthesised answer, and a policy that called wrongly saw
other values. The summary must be judged on what the rollout saw, so each reference fact is
traced back to where it came from, and read again from the observed responses:

1. `fact_sources(task)`: for every reference fact, the first leaf of the gold responses whose
   rendered value has the same tokens — (tool name, k-th call of that tool, JSON path). A fact
   with no such leaf (a composed phrase) has no source.
2. `observed_facts(task, observations)`: for each sourced fact, the value at the same path in the
   k-th successful response of the same tool in this rollout, rendered the same way (numbers
   without a trailing ".0", underscores as spaces). A fact without a source counts when its
   tokens all occur in the observed responses. A path missing from what was observed (an error,
   another tool) drops the fact: it was not observed, so it cannot be asked of the summary.

    facts = observed_facts(task, [("get_current_weather", '{"temperature": -3.5, ...}')])
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_TOKEN = re.compile(r"\d[\d,]*(?:\.\d+)?|[^\W\d_]+")

Path = tuple[Any, ...]


def fact_tokens(text: str) -> list[str]:
    """Case-folded word and number tokens; numbers normalised (19.0 → 19, 1,200 → 1200)."""
    tokens = []
    for token in _TOKEN.findall(str(text).casefold()):
        if token[0].isdigit():
            try:
                tokens.append(f"{float(token.replace(',', '')):.6g}")
                continue
            except ValueError:
                pass
        tokens.append(token)
    return tokens


def render_value(value: Any) -> str:
    """A response value as the synthesizer writes it into facts and answers."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return str(int(value)) if float(value).is_integer() else str(value)
    return str(value).replace("_", " ")


def leaves(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """(path, scalar) for every scalar leaf of a JSON value, depth first, in document order."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    elif value is not None:
        yield path, value


def value_at(value: Any, path: Path) -> Any:
    """The value at `path`, or None when the path does not exist."""
    for key in path:
        in_list = isinstance(key, int) and isinstance(value, list) and -len(value) <= key < len(value)
        in_mapping = isinstance(key, str) and isinstance(value, Mapping) and key in value
        if not (in_list or in_mapping):
            return None
        value = value[key]
    return value


@dataclass(frozen=True)
class FactSource:
    """Where a reference fact came from: the `occurrence`-th call of `tool`, at `path`."""

    fact: str
    tool: str | None = None
    occurrence: int = 0
    path: Path = ()


def fact_sources(task: Mapping[str, Any]) -> list[FactSource]:
    """Each reference fact with the gold-response leaf it was rendered from (see module doc)."""
    calls: list[tuple[str, int, Any]] = []
    seen: dict[str, int] = {}
    steps = task.get("gold_steps") or []
    responses = task.get("gold_responses") or []
    for step, step_responses in zip(steps, responses, strict=False):
        for call, response in zip(step, step_responses, strict=False):
            name = str(call.get("name"))
            calls.append((name, seen.get(name, 0), response))
            seen[name] = seen.get(name, 0) + 1
    sources = []
    for fact in task.get("reference") or []:
        wanted = fact_tokens(fact)
        found = next(
            (
                (name, k, path)
                for name, k, response in calls
                for path, leaf in leaves(response)
                if wanted and fact_tokens(render_value(leaf)) == wanted
            ),
            None,
        )
        sources.append(FactSource(str(fact), *found) if found else FactSource(str(fact)))
    return sources


def parse_observation(text: str) -> Any:
    """The JSON payload of a tool message; None for an error payload or unreadable text."""
    try:
        payload = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    if isinstance(payload, Mapping) and set(payload) == {"error"}:
        return None
    return payload


def observed_facts(task: Mapping[str, Any], observations: Sequence[tuple[str, str]]) -> list[str]:
    """The task's requested facts as the observed responses state them (see module doc)."""
    by_tool: dict[str, list[Any]] = {}
    for name, text in observations:
        payload = parse_observation(text)
        if payload is not None:
            by_tool.setdefault(str(name), []).append(payload)
    observed_tokens = set(fact_tokens(" ".join(text for _, text in observations)))
    facts: list[str] = []
    for source in fact_sources(task):
        if source.tool is None:
            if source.fact not in facts and set(fact_tokens(source.fact)) <= observed_tokens and observed_tokens:
                facts.append(source.fact)
            continue
        payloads = by_tool.get(source.tool, [])
        if source.occurrence >= len(payloads):
            continue
        value = value_at(payloads[source.occurrence], source.path)
        if value is None or isinstance(value, Mapping | list):
            continue
        fact = render_value(value)
        if fact_tokens(fact) and fact not in facts:
            facts.append(fact)
    return facts
