"""Persistent cache of llm-backend responses: one SQLite file, safe to share between threads.

Keys are digests of everything that shapes a response: the endpoint (base URL and served model),
the prompt version, the tool's full schema, the canonical arguments, the context (known records)
and the request itself (the exact chat messages, whose few-shot example the simulator's knobs
shape, and the generation settings). Values are response JSON. A cache hit answers without
touching the endpoint, so a re-run of training or calibration is free and reproducible; the backend
re-checks every hit against the
response schema before serving it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from slca.simulator.parsing import canonical_json

MEMO_SIZE = 20000
SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, tool TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL)"""


def cache_key(
    *,
    base_url: str,
    model: str,
    prompt_version: str,
    tool_schema: Any,
    arguments: dict,
    context: str = "",
    request: Any = None,
) -> str:
    """Digest of one request: a change to the endpoint, prompt, schema, knobs or generation settings is a
    different key. `request` is what is sent (messages, max_tokens, temperature), so every knob that changes
    the prompt changes the key while knobs that only validate arguments (checked before the cache) do not."""
    parts = (
        base_url,
        model,
        prompt_version,
        canonical_json(tool_schema),
        canonical_json(arguments),
        context,
        "" if request is None else canonical_json(request),
    )
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


class ResponseCache:
    """get/put of response dicts by key; `path=":memory:"` keeps it in memory."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA journal_mode=MEMORY")
            self._db.execute(SCHEMA)
            self._db.commit()
        except sqlite3.Error as error:
            raise ValueError(
                f"simulator cache {self.path}: cannot open SQLite file ({error}); check simulator.cache_path"
            ) from None
        self._lock = threading.Lock()  # guards the SQLite connection, the memo and the counters
        self._memo: dict[str, str] = {}  # in-process layer over SQLite for hot keys
        self.hits = self.misses = 0

    def get(self, key: str) -> dict | None:
        """The stored response, or None when there is none or it is not a JSON object."""
        with self._lock:
            text = self._memo.get(key)
            if text is None:
                row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
                text = self._remember(key, row[0]) if row is not None else None
        value = _object(text)
        with self._lock:
            if value is None:
                self.misses += 1
            else:
                self.hits += 1
        return value

    def _remember(self, key: str, text: str) -> str:
        """Add to the memo, evicting the oldest entry when full; the caller holds the lock."""
        if key not in self._memo and len(self._memo) >= MEMO_SIZE:
            self._memo.pop(next(iter(self._memo)))
        self._memo[key] = text
        return text

    def put(self, key: str, tool: str, response: dict) -> None:
        text = json.dumps(response, ensure_ascii=False)
        with self._lock:
            self._remember(key, text)
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)", (key, tool, text, time.time()))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _object(text: str | None) -> dict | None:
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
