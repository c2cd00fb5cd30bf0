"""The simulator's "today": the tool world's date, so synthesised dates read like the real executors'."""

from __future__ import annotations

from datetime import date

try:
    from slca.tools.world import TODAY as BASE_DATE
except ImportError:  # pragma: no cover - catalog without a world module
    BASE_DATE = date(2025, 6, 2)

__all__ = ["BASE_DATE"]
