"""Held-out partitions: which phrasing templates and entities only the test split may use.

Every template group (one tool's single asks, its parallel asks, one chain's asks) and every
entity pool (cities, bank customers, products, …) is shuffled by a seed-derived stream and cut:
a `fraction` of it (at least one, never all) is reserved for test, the rest serves train and val.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from slca.tools.entities import CURRENCY_RATES, UNITS


def heldout_count(n: int, fraction: float) -> int:
    """How many of n items the test split keeps for itself: at least one, never all of them."""
    if n < 2:
        return 0
    return max(1, min(n - 1, round(fraction * n)))


def cut(items: Sequence[str], fraction: float, seed: int, name: str) -> tuple[list[str], list[str]]:
    """(kept for train/val, held out for test), both in the original order."""
    order = list(items)
    random.Random(f"{seed}|holdout|{name}").shuffle(order)
    held = set(order[: heldout_count(len(order), fraction)])
    return [x for x in items if x not in held], [x for x in items if x in held]


def entity_pools(world: object) -> dict[str, list[str]]:
    """Entity keys per pool; records that belong together (a customer's accounts) share a key."""
    from slca.tools.entities import CITIES

    return {
        "city": [c[0] for c in CITIES],
        "bank_customer": list(world.bank_customers),
        "contact": [c["email"] for c in world.contacts],
        "event": list(world.events),
        "product": list(world.products),
        "shopper": list(world.shoppers),
        "currency": list(CURRENCY_RATES),
        "unit": [u for u in UNITS if UNITS[u][0] != "temperature"],
    }


def split_pools(pools: Mapping[str, list[str]], fraction: float, seed: int) -> dict[str, dict[str, list[str]]]:
    """{"seen": pools for train/val, "heldout": pools for test}."""
    seen, held = {}, {}
    for name, items in pools.items():
        seen[name], held[name] = cut(items, fraction, seed, f"entity:{name}")
    return {"seen": seen, "heldout": held}


def split_templates(groups: Mapping[str, int], fraction: float, seed: int) -> dict[str, dict[str, list[int]]]:
    """Template indices per group: {"seen": {group: [i, …]}, "heldout": {group: [i, …]}}."""
    seen, held = {}, {}
    for group, n in groups.items():
        keep, out = cut([str(i) for i in range(n)], fraction, seed, f"template:{group}")
        seen[group], held[group] = [int(i) for i in keep], [int(i) for i in out]
    return {"seen": seen, "heldout": held}
