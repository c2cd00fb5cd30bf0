"""Schema-guided response synthesis for a valid call (the schema backend, and the llm backend's fallback)."""

from __future__ import annotations

from slca.simulator.specs import ToolSpec
from slca.simulator.state import EpisodeState, primary_id
from slca.simulator.synth import fits, id_prefix, synthesize
from slca.simulator.types import Knobs


def flat_hints(arguments: dict) -> dict:
    """Argument values by field name: top level first, then leaves of nested objects."""
    hints = dict(arguments)
    stack = [value for value in arguments.values() if isinstance(value, dict)]
    while stack:
        nested = stack.pop(0)
        for key, value in nested.items():
            if isinstance(value, dict):
                stack.append(value)
            hints.setdefault(key, value)
    return hints


def synthesize_response(spec: ToolSpec, arguments: dict, state: EpisodeState, knobs: Knobs) -> dict:
    """The schema backend's payload for a valid call (also the llm backend's fallback)."""
    if not spec.response.get("properties"):  # no response schema known: acknowledge the request
        return {"status": "success", "request": {"name": spec.name, "arguments": arguments}}
    rng = state.rng_for(spec.name, arguments, spec.writes)
    remembered = state.hints_for(arguments) if knobs.track_writes else {}
    hints = {**spec.defaults, **remembered, **flat_hints(arguments)}
    related = (lambda items: state.related(items, arguments)) if knobs.track_writes else None
    content = synthesize(spec.response, rng, hints, knobs, related)
    if not isinstance(content, dict):
        return {"result": content}
    if spec.writes and knobs.new_id_start > 0:
        assign_new_id(spec, content, arguments, state, knobs.new_id_start)
    return content


def assign_new_id(spec: ToolSpec, content: dict, arguments: dict, state: EpisodeState, start: int) -> None:
    """Give the record a write tool creates the next sequential id of its kind."""
    field = primary_id(spec.response.get("properties", {}))
    if field is None or field in arguments or not isinstance(content.get(field), str):
        return
    candidate = state.next_id(id_prefix(field), start)
    if fits(candidate, spec.response["properties"][field]):
        content[field] = candidate
