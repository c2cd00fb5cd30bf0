"""Per-episode simulator state: seeded randomness, remembered records, the real world if any.

Every record (a JSON object with an identifier field such as `booking_id`) that a response carries
is remembered by (id field, id value) and merged with later responses about it, so `get_booking`
after `book_flight` — or after `cancel_booking` — shows what was written. Records that a write
tool produced or changed also appear in later list reads whose items share their id field.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from typing import Any

from slca.simulator.parsing import canonical_json

DELETE_VERBS = ("delete", "remove")


def primary_id(keys: Any) -> str | None:
    """The identifier field of a record: its first key named `id` or ending in `_id`."""
    for key in keys:
        if isinstance(key, str) and (key == "id" or key.endswith("_id")):
            return key
    return None


def loosely_equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    return a == b


class EpisodeState:
    """What one episode's simulator remembers; create one per rollout."""

    def __init__(self, seed: int = 0, world: Any = None) -> None:
        self.seed = int(seed)
        self.world = world
        self.records: dict[tuple[str, str], dict] = {}
        self.written: list[tuple[str, str]] = []  # keys of records a write tool produced, in order
        self.occurrences: Counter[str] = Counter()

    def rng_for(self, name: str, arguments: dict, writes: bool) -> random.Random:
        """Same read call -> same generator; a repeated write gets a fresh one (a new record)."""
        key = f"{self.seed}|{name}|{canonical_json(arguments)}"
        if writes:
            self.occurrences[key] += 1
            key = f"{key}|{self.occurrences[key]}"
        digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
        return random.Random(int.from_bytes(digest, "big"))

    def next_id(self, prefix: str, start: int) -> str:
        """Sequential identifier per prefix, like a database sequence."""
        key = f"id:{prefix}"
        self.occurrences[key] += 1
        return f"{prefix}-{start + self.occurrences[key] - 1}"

    def hints_for(self, arguments: dict) -> dict:
        """Fields of remembered records the arguments point at by identifier."""
        hints: dict = {}
        for key, value in arguments.items():
            if isinstance(value, str) and (key, value) in self.records:
                hints.update(self.records[(key, value)])
        return hints

    def related(self, item_schema: dict, arguments: dict) -> list[dict]:
        """Written records that belong in a list of `item_schema` objects filtered by `arguments`."""
        id_field = primary_id(item_schema.get("properties", {}))
        if id_field is None:
            return []
        out = []
        for key in self.written:
            record = self.records.get(key)
            if key[0] == id_field and record is not None and self._matches(record, arguments):
                out.append(record)
        return out

    @staticmethod
    def _matches(record: dict, arguments: dict) -> bool:
        return all(
            loosely_equal(record[key], value)
            for key, value in arguments.items()
            if key in record and not isinstance(value, (dict, list))
        )

    def remember(self, name: str, content: Any, writes: bool) -> None:
        """Store every record in a response; a write also marks them (a delete forgets them)."""
        deleting = writes and name.split("_", 1)[0].lower() in DELETE_VERBS
        for record in _records(content):
            field = primary_id(record)
            key = (field, record[field])
            if deleting:
                self.records.pop(key, None)
                self.written = [k for k in self.written if k != key]
                continue
            self.records[key] = {**self.records.get(key, {}), **record}
            if writes and key not in self.written:
                self.written.append(key)


def _records(content: Any, depth: int = 0) -> list[dict]:
    """Objects with a string identifier anywhere in a response (outermost first)."""
    if depth > 8:
        return []
    found: list[dict] = []
    if isinstance(content, dict):
        field = primary_id(content)
        if field is not None and isinstance(content[field], str):
            found.append(content)
        for value in content.values():
            found.extend(_records(value, depth + 1))
    elif isinstance(content, list):
        for value in content:
            found.extend(_records(value, depth + 1))
    return found
