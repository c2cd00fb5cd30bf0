"""Persistent cache of llm-backend responses: one SQLite file, safe to share between threads.

Keys are digests of (model, tool, canonical arguments, context); values are response JSON. A cache
hit answers without touching the endpoint, so a re-run of training or calibration is free and
reproducible.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from slca.simulator.parsing import canonical_json

MEMO_SIZE = 20000
SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, tool TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL)"""


def cache_key(model: str, tool: str, arguments: dict, context: str = "") -> str:
    text = "\x1f".join((model, tool, canonical_json(arguments), context))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
            raise ValueError(f"simulator cache {self.path}: cannot open SQLite file ({error}); "
                             "check simulator.cache_path") from None
        self._lock = threading.Lock()
        self._memo: dict[str, str] = {}  # in-process layer over SQLite for hot keys
        self.hits = self.misses = 0

    def get(self, key: str) -> dict | None:
        text = self._memo.get(key)
        if text is None:
            with self._lock:
                row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            text = self._remember(key, row[0])
        self.hits += 1
        return json.loads(text)

    def _remember(self, key: str, text: str) -> str:
        if len(self._memo) >= MEMO_SIZE:
            self._memo.pop(next(iter(self._memo)))
        self._memo[key] = text
        return text

    def put(self, key: str, tool: str, response: dict) -> None:
        self._remember(key, json.dumps(response, ensure_ascii=False))
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                             (key, tool, json.dumps(response, ensure_ascii=False), time.time()))
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
