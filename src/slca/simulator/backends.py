"""Backends that answer a parsed, toolset-checked call; one registry, chosen by name.

    @register("schema")
    class SchemaBackend: ...
    backend = make_backend("schema")
    backend.respond(spec, arguments, state, knobs) -> ToolResult

The registry lives in `slca.simulator.registry`, response synthesis in `slca.simulator.response`.
`schema` validates then synthesizes (deterministic, stateful); `real` runs the catalog's executors
on the episode's `World`; `llm` (in `slca.simulator.llm`) asks a model prompted as an API server.
"""

from __future__ import annotations

from typing import Any

from slca.simulator.registry import BACKENDS, Backend, register
from slca.simulator.response import assign_new_id, flat_hints, synthesize_response
from slca.simulator.specs import ToolSpec
from slca.simulator.state import EpisodeState
from slca.simulator.types import Knobs, ToolResult
from slca.simulator.validation import check_arguments

__all__ = [
    "BACKENDS",
    "Backend",
    "RealBackend",
    "SchemaBackend",
    "assign_new_id",
    "flat_hints",
    "make_backend",
    "register",
    "synthesize_response",
]


def make_backend(name: str, params: Any = None, **options: Any) -> Backend:
    """A backend instance by registry name; `params` is SimulatorParams (or None for defaults)."""
    if name == "llm" and name not in BACKENDS:
        import slca.simulator.llm  # noqa: F401  (registers itself; keeps httpx off the hot import path)
    if name not in BACKENDS:
        raise ValueError(f"unknown simulator backend {name!r}; choose one of {sorted(BACKENDS) + ['llm']}")
    return BACKENDS[name](params=params, **options)


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
