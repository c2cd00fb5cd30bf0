"""Time JavaScript array conversion (`converters.js_array`) on the inputs that broke the official regex.

    python benchmarks/js_arrays.py [--count 10000] [--max-chars 20000]

Prints, in one run: the backtracking case (`"[" + "[1]," * n + "[1] x"`) through the bare official
pattern at 78 and 86 characters and through the converter at 40,000 characters; then `--count`
random nested arrays (random shape and length up to `--max-chars` characters) through the converter:
median and slowest milliseconds, and the slowest against the 50 ms target.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from slca.eval.bfcl.converters import _JS_ARRAY_2D, js_array

SCALARS = ["1", "-2", "3.5", "true", "'a'", '"b c"', "x", "null", ""]
SPACES = ["", " ", "  ", "\n", "\t"]


def random_array(rng: random.Random, budget: int, depth: int = 0) -> str:
    """A nested JS array literal of about `budget` characters, of random shape."""
    parts, used = [], 0
    while used < budget:
        if depth < 3 and rng.random() < 0.4:
            part = random_array(rng, rng.randint(2, max(2, budget // 4)), depth + 1)
        else:
            part = rng.choice(SCALARS)
        part = rng.choice(SPACES) + part + rng.choice(SPACES)
        parts.append(part)
        used += len(part) + 1
    open_, close = ("new Array(", ")") if rng.random() < 0.2 else ("[", "]")
    text = open_ + ",".join(parts) + close
    return text if rng.random() < 0.8 else text + rng.choice([" x", "", ",", "]"])  # some do not match


def _ms(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--max-chars", type=int, default=20000)
    args = parser.parse_args()
    for n in (19, 21):
        code = "[" + "[1]," * n + "[1] x"
        print(f"official regex, {len(code)} characters: {_ms(_JS_ARRAY_2D.match, code):.0f} ms")
    code = "[" + "[1]," * 10000 + "[1] x"
    print(f"converter, {len(code)} characters: {_ms(js_array, code):.1f} ms")
    rng = random.Random(0)
    times, sizes = [], []
    for _ in range(args.count):
        text = random_array(rng, rng.randint(1, args.max_chars))[: args.max_chars]
        sizes.append(len(text))
        times.append(_ms(js_array, text))
    slowest = max(range(len(times)), key=times.__getitem__)
    print(
        f"{args.count} random nested arrays of {min(sizes)}-{max(sizes)} characters: median "
        f"{statistics.median(times):.2f} ms, slowest {times[slowest]:.2f} ms ({sizes[slowest]} characters); "
        f"slowest / 50 ms target = {times[slowest] / 50:.2f}"
    )


if __name__ == "__main__":
    main()
