"""Backends that answer a parsed, toolset-checked call; one registry, chosen by name.

    @register("schema")
    class SchemaBackend: ...
    backend = make_backend("schema")
    backend.respond(spec, arguments, state, knobs) -> ToolResult

`schema` validates then synthesizes (deterministic, stateful); `real` runs the catalog's executors
on the episode's `World`; `llm` (in `slca.simulator.llm`) asks a model prompted as an API server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from slca.simulator.specs import ToolSpec
from slca.simulator.state import EpisodeState, primary_id
from slca.simulator.synth import fits, id_prefix, synthesize
from slca.simulator.types import Knobs, ToolResult
from slca.simulator.validation import check_arguments


class Backend(Protocol):
    name: str

    def respond(self, spec: ToolSpec, arguments: dict, state: EpisodeState, knobs: Knobs) -> ToolResult:
        ...


BACKENDS: dict[str, Callable[..., Backend]] = {}


def register(name: str) -> Callable:
    """Class decorator adding a backend factory to the registry under `name`."""

    def wrap(factory: Callable[..., Backend]) -> Callable[..., Backend]:
        BACKENDS[name] = factory
        factory.name = name
        return factory

    return wrap


def make_backend(name: str, params: Any = None, **options: Any) -> Backend:
    """A backend instance by registry name; `params` is SimulatorParams (or None for defaults)."""
    if name == "llm" and name not in BACKENDS:
        import slca.simulator.llm  # noqa: F401  (registers itself; keeps httpx off the hot import path)
    if name not in BACKENDS:
        raise ValueError(f"unknown simulator backend {name!r}; choose one of {sorted(BACKENDS) + ['llm']}")
    return BACKENDS[name](params=params, **options)


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


@register("schema")
class SchemaBackend:
    """Validate with the catalog's rules, then synthesize a conforming, consistent response."""

    def __init__(self, params: Any = None) -> None:
        self.params = params

    def respond(self, spec: ToolSpec, arguments: dict, state: EpisodeState, knobs: Knobs) -> ToolResult:
        arguments, problem = check_arguments(spec, arguments, knobs)
        if problem is not None:
            return problem
        content = synthesize_response(spec, arguments, state, knobs)
        if knobs.track_writes:
            state.remember(spec.name, content, spec.writes)
        return ToolResult(True, content, None, None, spec.name, "schema")


@register("real")
class RealBackend:
    """The catalog's real executors over the episode's world (built from the state seed if absent)."""

    def __init__(self, params: Any = None, world_seed: int | None = None) -> None:
        self.world_seed = world_seed

    def respond(self, spec: ToolSpec, arguments: dict, state: EpisodeState, knobs: Knobs) -> ToolResult:
        from slca.tools import World, execute

        if state.world is None:
            state.world = World(self.world_seed if self.world_seed is not None else state.seed)
        result = execute(state.world, spec.name, arguments)
        return ToolResult(result.ok, result.content, result.error, result.error_class, spec.name, "real")
