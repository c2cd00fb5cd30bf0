"""Building blocks of task recipes: sampling context, draws, single-tool and chained recipes.

A `ToolRecipe` phrases requests for one tool (`asks`, several templates), samples arguments from
the entities its split may use (`sample`), and turns the real executor output into reference
facts (`facts`) and answer sentences (`answers`). A `ChainRecipe` does the same for a multi-step
task whose later calls take their arguments from earlier outputs (`steps`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any


class Reject(Exception):
    """The sampled draw cannot make a valid task (empty search, failed call); draw again."""


@dataclass
class Ctx:
    """What a sampler may use: its random stream, the world, and the split's allowed entities."""

    rng: random.Random
    world: Any
    pools: dict[str, list[str]]
    plain: bool = False  # parallel items: no optional extras the shared phrasing cannot express
    used: list[str] = field(default_factory=list)

    def pick(self, pool: str, exclude: Sequence[str] = ()) -> str:
        choices = [v for v in self.pools[pool] if v not in exclude]
        if not choices:
            raise Reject(f"no {pool} left to pick")
        value = self.rng.choice(choices)
        self.used.append(f"{pool}:{value}")
        return value

    def pick_many(self, pool: str, k: int) -> list[str]:
        if len(self.pools[pool]) < k:
            raise Reject(f"fewer than {k} {pool} entities")
        values = self.rng.sample(self.pools[pool], k)
        self.used.extend(f"{pool}:{v}" for v in values)
        return values

    def chance(self, p: float) -> bool:
        return self.rng.random() < p


@dataclass(frozen=True)
class Draw:
    """One sampled call: phrasing slots, the call's arguments, and the short item label."""

    slots: dict[str, str]
    arguments: dict
    item: str = ""  # how this call is named inside a parallel request ("Lima", "EUR to JPY")


Facts = dict[str, str]


@dataclass(frozen=True)
class ToolRecipe:
    """Single-tool task family; supports single, multiple, no_call and (if `parallel`) parallel."""

    tool: str
    domain: str
    asks: tuple[str, ...]
    sample: Callable[[Ctx], Draw]
    facts: Callable[[dict, Draw], Facts]
    answers: tuple[str, ...]
    gist: str  # what the user wants, for refusals: "check today's weather"
    parallel: tuple[str, ...] = ()  # phrasings with {items}
    writes: bool = False  # mutates the world: run on a private copy
    refusable: bool = True  # False: answerable without tools (plain arithmetic), so never a no_call task

    @property
    def key(self) -> str:
        return self.tool


@dataclass(frozen=True)
class ChainRecipe:
    """Multi-step task: `steps(ctx_slots, responses_so_far)` yields each next step's calls."""

    name: str
    domain: str
    tools: tuple[str, ...]
    asks: tuple[str, ...]
    sample: Callable[[Ctx], dict]  # slots (and "_"-prefixed private values)
    steps: Callable[[dict, list[list[dict]]], list[dict] | None]  # None = done
    facts: Callable[[dict, list[list[dict]]], Facts]
    answers: tuple[str, ...]
    writes: bool = False

    @property
    def key(self) -> str:
        return self.name


# ---- shared phrasing helpers ----

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def human_date(day: str) -> str:
    d = date.fromisoformat(day)
    return f"{MONTHS[d.month - 1]} {d.day}"


def date_phrase(rng: random.Random, today: str, offset: int) -> str:
    """A date said one of several ways: ISO, 'June 5', 'tomorrow', 'in 3 days', 'yesterday'."""
    day = (date.fromisoformat(today) + timedelta(days=offset)).isoformat()
    forms = [f"on {day}", f"on {human_date(day)}"]
    if offset == 1:
        forms.append("tomorrow")
    elif offset == -1:
        forms.append("yesterday")
    elif 2 <= offset <= 6:
        forms.append(f"in {offset} days")
    elif -6 <= offset <= -2:
        forms.append(f"{-offset} days ago")
    return rng.choice(forms)


def shift(today: str, offset: int) -> str:
    return (date.fromisoformat(today) + timedelta(days=offset)).isoformat()


def join_items(items: Sequence[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def money(value: float) -> str:
    return f"{value:.2f}"


def num(value: float) -> str:
    """Numbers as the executor returned them, without a trailing '.0'."""
    return str(int(value)) if float(value).is_integer() else str(value)


def words(value: str) -> str:
    return value.replace("_", " ")
