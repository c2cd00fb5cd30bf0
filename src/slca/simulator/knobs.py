"""Load the knobs calibration chose, so training simulates with what agreed best with the executors.

knobs = load_calibrated_knobs("reports/calibration.json", params.simulator)
SimulatorSession(tools, params=params.simulator, knobs=knobs)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slca.simulator.types import Knobs


def load_calibrated_knobs(report_path: Path | str, params: Any = None) -> dict[str, Any]:
    """Knob values: the report's `knobs` over `params` (SimulatorParams/Params) over defaults.

    A missing report falls back to params; an unreadable one raises ValueError naming the file.
    """
    if params is not None and hasattr(params, "simulator"):
        params = params.simulator
    base = Knobs.from_mapping(params).as_dict()
    path = Path(report_path)
    if not path.exists():
        return base
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(
            f"{path}: calibration report is not readable JSON ({error}); rerun `slca calibrate` or delete the file"
        ) from None
    chosen = report.get("knobs", {}) if isinstance(report, dict) else {}
    if not isinstance(chosen, dict):
        raise ValueError(f"{path}: key 'knobs' must be a mapping of knob names to values")
    known = {name: value for name, value in chosen.items() if name in base}
    return Knobs.from_mapping({**base, **known}).as_dict()
