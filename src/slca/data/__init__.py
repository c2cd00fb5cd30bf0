"""Task synthesis, splits and data validation (the `synthesize` stage).

from slca.data import synthesize, run_synthesize, validate_files
"""

from __future__ import annotations

from slca.data.expectations import DataValidationError
from slca.data.synthesis import SynthesisError, synthesize

__all__ = ["DataValidationError", "SynthesisError", "run_synthesize", "synthesize", "validate_files"]


def __getattr__(name: str):  # the stage pulls in MLflow; import it only when asked for
    if name in ("run_synthesize", "validate_files"):
        from slca.data import stage

        return getattr(stage, name)
    raise AttributeError(name)
