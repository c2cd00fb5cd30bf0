"""Schema-Guided LLM Simulator (SGLS): answers tool calls during training without a live API.

    from slca.simulator import SimulatorSession, simulate
    simulate(schema, '{"name": "get_forecast", "arguments": {"city": "Lima", "days": 2}}')
    session = SimulatorSession(row["tools"], backend="schema", params=params.simulator, seed=3)
    session.call(raw_text_inside_tool_call)  # -> ToolResult(ok, content, error, error_class)

Backends (registry `BACKENDS`): `schema` (deterministic schema-guided synthesis, default), `llm`
(a model prompted as an API server through an OpenAI-compatible endpoint or a local callable, with
a SQLite cache and schema fallback), `real` (the catalog's executors). Calibration against `real`:
`slca.simulator.calibration.run_calibrate(params)`; tuned knobs: `load_calibrated_knobs(path)`.
"""

from __future__ import annotations

from slca.simulator.backends import BACKENDS, Backend, make_backend, register
from slca.simulator.knobs import load_calibrated_knobs
from slca.simulator.session import SimulatorSession, simulate
from slca.simulator.state import EpisodeState
from slca.simulator.types import ERROR_CLASSES, Knobs, ToolResult

__all__ = [
    "BACKENDS",
    "ERROR_CLASSES",
    "Backend",
    "EpisodeState",
    "Knobs",
    "SimulatorSession",
    "ToolResult",
    "load_calibrated_knobs",
    "make_backend",
    "register",
    "simulate",
]
