"""Entry points: `simulate` for one call and `SimulatorSession` for one episode.

Every call goes parse (size/depth caps, JSON, shape) -> toolset check -> backend; each failure is a
`ToolResult(ok=False, error=..., error_class=...)`, never an exception.

    session = SimulatorSession(row["tools"], backend="schema", params=params.simulator, seed=17)
    result = session.call('{"name": "get_current_weather", "arguments": {"city": "Lima"}}')
    result.to_message()  # text for the <tool_response> block
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from slca.simulator.backends import Backend, make_backend
from slca.simulator.knobs import load_calibrated_knobs
from slca.simulator.parsing import ParsedCall, canonical_json, clip, parse_call
from slca.simulator.specs import ToolSpec, toolset
from slca.simulator.state import EpisodeState
from slca.simulator.types import Knobs, ToolResult

_TOOLSETS: OrderedDict[str, dict[str, ToolSpec]] = OrderedDict()
_BACKENDS: dict[str, Backend] = {}


def resolve_knobs(params: Any = None, knobs: Any = None) -> Knobs:
    """Knobs: explicit ones, else the calibration report named by params, else params, else defaults."""
    if knobs is not None:
        return Knobs.from_mapping(knobs)
    if params is not None and hasattr(params, "simulator"):
        params = params.simulator
    report = getattr(params, "calibrated_knobs", None)
    if report:
        return Knobs.from_mapping(load_calibrated_knobs(report, params))
    return Knobs.from_mapping(params)


def answer(specs: dict[str, ToolSpec], call: Any, backend: Backend, state: EpisodeState, knobs: Knobs) -> ToolResult:
    """One call through parse -> toolset check -> backend; never raises."""
    parsed = parse_call(call, max_chars=knobs.max_call_chars, max_depth=knobs.max_depth)
    if isinstance(parsed, ToolResult):
        return parsed
    return dispatch(specs, parsed, backend, state, knobs)


def dispatch(
    specs: dict[str, ToolSpec], parsed: ParsedCall, backend: Backend, state: EpisodeState, knobs: Knobs
) -> ToolResult:
    spec = specs.get(parsed.name)
    if spec is None:
        return ToolResult.failure(
            "unknown_tool", f"Tool {clip(parsed.name, 80)} not found in the current available tools set.", parsed.name
        )
    try:
        return backend.respond(spec, parsed.arguments, state, knobs)
    except Exception as error:  # noqa: BLE001 - a backend bug must not end a rollout
        return ToolResult(
            False,
            None,
            (f"Tool {spec.name} could not be simulated ({type(error).__name__})."),
            "backend",
            spec.name,
            "backend",
        )


class SimulatorSession:
    """Tools offered in one episode, the backend answering them, and the episode's state."""

    def __init__(
        self,
        tools: Any = None,
        backend: str | Backend = "schema",
        params: Any = None,
        world: Any = None,
        *,
        seed: int = 0,
        knobs: Any = None,
        copy_world: bool = True,
    ) -> None:
        self.specs = toolset(tools)
        self.knobs = resolve_knobs(params, knobs)
        sim_params = params.simulator if params is not None and hasattr(params, "simulator") else params
        self.backend = _shared_backend(backend, sim_params) if isinstance(backend, str) else backend
        if world is not None and copy_world:
            world = world.copy()
        self.state = EpisodeState(seed, world)
        self.history: list[tuple[Any, ToolResult]] = []

    def call(self, call: Any) -> ToolResult:
        """Answer one call (raw `<tool_call>` text or a dict)."""
        result = answer(self.specs, call, self.backend, self.state, self.knobs)
        self.history.append((call, result))
        return result

    def call_many(self, calls: list[Any]) -> list[ToolResult]:
        """Answer one step's calls in order (parallel calls see each other's writes in order)."""
        return [self.call(call) for call in calls]


def simulate(
    tool_schema: Any,
    call: Any,
    *,
    backend: str | Backend = "schema",
    state: EpisodeState | None = None,
    knobs: Any = None,
) -> ToolResult:
    """Answer one call against `tool_schema` (a tool, a list of tools, or None = whole catalog)."""
    try:
        specs = _cached_toolset(tool_schema)
    except Exception:  # noqa: BLE001 - unreadable tool definitions are an error result, not a crash
        return ToolResult.failure("malformed", "Tool definitions could not be read.")
    engine = _shared_backend(backend) if isinstance(backend, str) else backend
    return answer(specs, call, engine, state if state is not None else EpisodeState(), resolve_knobs(knobs=knobs))


def _cached_toolset(tools: Any) -> dict[str, ToolSpec]:
    key = "<catalog>" if tools is None else canonical_json(tools)
    hit = _TOOLSETS.get(key)
    if hit is None:
        hit = _TOOLSETS[key] = toolset(tools)
        if len(_TOOLSETS) > 256:
            _TOOLSETS.popitem(last=False)
    return hit


def _shared_backend(name: str, params: Any = None) -> Backend:
    """One backend per (name, params) in the process: episodes share its client and cache."""
    key = f"{name}|{params.model_dump_json() if hasattr(params, 'model_dump_json') else repr(params)}"
    if key not in _BACKENDS:
        _BACKENDS[key] = make_backend(name, params)
    return _BACKENDS[key]
