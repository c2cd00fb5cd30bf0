"""Load the vendored BFCL v4 non-live AST categories (questions and possible answers).

The files under `vendor/bfcl/` are JSON Lines despite their `.json` suffix. Set
`SLCA_BFCL_DIR` to read them from another folder.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
)
VERSION_PREFIX = "BFCL_v4"


def category_language(category: str) -> str:
    """The language BFCL decodes and type-checks a category in: Python, Java or JavaScript."""
    if category == "simple_java":
        return "Java"
    if category == "simple_javascript":
        return "JavaScript"
    return "Python"


def vendor_dir() -> Path:
    """Folder holding the BFCL files (env `SLCA_BFCL_DIR`, else `<repo>/vendor/bfcl`)."""
    override = os.environ.get("SLCA_BFCL_DIR")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[4] / "vendor" / "bfcl"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"BFCL data file not found: {path} (set SLCA_BFCL_DIR)")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def check_category(category: str) -> str:
    """Return `category` or raise a one-line error naming the valid ones."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown BFCL category {category!r}; expected one of {', '.join(CATEGORIES)}")
    return category


@cache
def _load(category: str, root: str) -> tuple[dict[str, Any], ...]:
    base = Path(root)
    questions = _read_jsonl(base / f"{VERSION_PREFIX}_{category}.json")
    if category == "irrelevance":
        return tuple({**q, "ground_truth": None} for q in questions)
    answers = {
        a["id"]: a["ground_truth"] for a in _read_jsonl(base / "possible_answer" / f"{VERSION_PREFIX}_{category}.json")
    }
    missing = [q["id"] for q in questions if q["id"] not in answers]
    if missing:
        raise ValueError(f"BFCL {category}: no possible answer for {missing[:3]}")
    return tuple({**q, "ground_truth": answers[q["id"]]} for q in questions)


def load_category(category: str) -> list[dict[str, Any]]:
    """Entries `{id, question, function, ground_truth}` of one category (ground_truth None for irrelevance).

    The entries are shared and cached: treat them as read-only.
    """
    return list(_load(check_category(category), str(vendor_dir())))
