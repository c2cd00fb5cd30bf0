"""The backend registry: a `Backend` answers a parsed, toolset-checked call; chosen by name.

@register("schema")
class SchemaBackend: ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from slca.simulator.specs import ToolSpec
from slca.simulator.state import EpisodeState
from slca.simulator.types import Knobs, ToolResult


class Backend(Protocol):
    name: str

    def respond(self, spec: ToolSpec, arguments: dict, state: EpisodeState, knobs: Knobs) -> ToolResult: ...


BACKENDS: dict[str, Callable[..., Backend]] = {}


def register(name: str) -> Callable:
    """Class decorator adding a backend factory to the registry under `name`."""

    def wrap(factory: Callable[..., Backend]) -> Callable[..., Backend]:
        BACKENDS[name] = factory
        factory.name = name
        return factory

    return wrap
