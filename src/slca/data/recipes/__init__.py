"""Every task recipe, per domain: single-tool families (`RECIPES`) and multi-step chains (`CHAINS`)."""

from __future__ import annotations

from slca.data.recipes import banking, calendar, flights, math, retail, science, weather

_DOMAINS = (weather, flights, banking, calendar, retail, math, science)
RECIPES = tuple(r for module in _DOMAINS for r in module.RECIPES)
CHAINS = tuple(c for module in _DOMAINS for c in module.CHAINS)
