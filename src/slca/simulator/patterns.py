"""Generate a string matching a JSON-schema `pattern` (the regex subset tool schemas use).

Walks the parse tree of Python's own regex parser: literals, classes and ranges, categories
(\\d \\w \\s), groups, alternation, bounded/unbounded repeats and anchors. Anything else yields None
and the caller falls back to another value. Unbounded repeats stop at a few characters.

    pattern_string("^ACC-[0-9]+$", random.Random(0)) -> "ACC-4071"
"""

from __future__ import annotations

import random
import re
from functools import lru_cache
from typing import Any

try:  # Python 3.11+
    import re._constants as C
    import re._parser as sre_parse
except ImportError:  # pragma: no cover - older interpreters
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

_CATEGORY = {
    C.CATEGORY_DIGIT: "0123456789",
    C.CATEGORY_WORD: "abcdefghijklmnopqrstuvwxyz0123456789",
    C.CATEGORY_SPACE: " ",
}
_ANY = "abcdefghijklmnopqrstuvwxyz"
UNBOUNDED_EXTRA = 3


class Unsupported(Exception):
    pass


@lru_cache(maxsize=256)
def _tree(pattern: str) -> Any:
    return sre_parse.parse(pattern)


POOL_SIZE = 64


def pattern_string(pattern: str, rng: random.Random) -> str | None:
    """A string that `re.search(pattern, s)` accepts, or None for unsupported patterns."""
    pool = _pool(pattern)
    return rng.choice(pool) if pool else None


@lru_cache(maxsize=512)
def _pool(pattern: str) -> tuple[str, ...]:
    """Matching strings drawn once per pattern (synthesis then only picks one)."""
    rng = random.Random(pattern)
    out = []
    for _ in range(POOL_SIZE):
        text = generate(pattern, rng)
        if text is None:
            return ()
        out.append(text)
    return tuple(out)


def generate(pattern: str, rng: random.Random, min_repeat_extra: int = 1) -> str | None:
    """One fresh matching string, or None for unsupported patterns."""
    try:
        text = _emit(_tree(pattern), rng, min_repeat_extra)
    except (Unsupported, re.error, RecursionError, ValueError, IndexError):
        return None
    return text if re.search(pattern, text) else None


def _emit(items: Any, rng: random.Random, extra: int) -> str:
    return "".join(_emit_one(op, arg, rng, extra) for op, arg in items)


def _emit_one(op: Any, arg: Any, rng: random.Random, extra: int) -> str:
    if op is C.LITERAL:
        return chr(arg)
    if op is C.AT:
        return ""
    if op is C.ANY:
        return rng.choice(_ANY)
    if op is C.IN:
        return _from_class(arg, rng)
    if op is C.SUBPATTERN:
        return _emit(arg[-1], rng, extra)
    if op is C.BRANCH:
        return _emit(rng.choice(arg[1]), rng, extra)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
        low, high, body = arg
        high = low + UNBOUNDED_EXTRA if high is C.MAXREPEAT else high
        count = rng.randint(low, max(low, min(high, low + extra + UNBOUNDED_EXTRA)))
        if low == 0 and high >= 1:
            count = max(count, 1)  # an optional part present reads more naturally
        return "".join(_emit(body, rng, extra) for _ in range(count))
    raise Unsupported(str(op))


def _from_class(members: list, rng: random.Random) -> str:
    if members and members[0][0] is C.NEGATE:
        excluded = _class_chars(members[1:])
        return rng.choice([c for c in _ANY + "0123456789" if c not in excluded] or ["~"])
    choices = _class_chars(members)
    if not choices:
        raise Unsupported("empty class")
    return rng.choice(choices)


def _class_chars(members: list) -> str:
    out = []
    for op, arg in members:
        if op is C.LITERAL:
            out.append(chr(arg))
        elif op is C.RANGE:
            low, high = arg
            out.extend(chr(code) for code in range(low, min(high, low + 200) + 1))
        elif op is C.CATEGORY:
            if arg not in _CATEGORY:
                raise Unsupported(str(arg))
            out.append(_CATEGORY[arg])
        else:
            raise Unsupported(str(op))
    return "".join(out)
