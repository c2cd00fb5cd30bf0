"""Time BFCL scoring: score the gold answers of all seven vendored categories (target < 2 s).

    python benchmarks/bfcl_score.py [--style prompt|json] [--repeat 3]

Gold answers are rendered once (not timed); the timed part is decoding + checking every entry
(1,390 outputs), with the category data already loaded. Prints per-category accuracy and the
best wall time over the repeats, then the time to score a fixed corpus of hostile outputs
(target < 2 s in all) and its slowest case.
"""

from __future__ import annotations

import argparse
import time

from slca.eval.bfcl import (
    CATEGORIES,
    accuracy,
    aggregate,
    load_category,
    score_entry,
    score_results,
)
from slca.eval.bfcl.decode import MAX_OUTPUT_CHARS
from slca.eval.bfcl.render import render_json_answer, render_prompt_answer

PUNCTUATION = ")(}{][" * (MAX_OUTPUT_CHARS // 6)
# (category, raw output): outputs that once took seconds to hours, then the slowest found since
# (punctuation and a call list at the output-length bound, and punctuation far over it).
ADVERSARIAL = [
    ("simple_python", "<tool_call>" + "\n" * 1000),
    ("simple_python", "<tool_call>" + " " * 2000),
    ("simple_python", "<tool_call>" + " " * 8000),
    ("simple_python", "[f(x=((10**1000)**1000)**1000)]"),
    ("simple_python", "[f(x='a'*10**10)]"),
    ("simple_python", "[f(x=[0]*10**9)]"),
    ("simple_python", "[f(x='%0100000000d'%1)]"),
    ("simple_python", "[f(x='%*d'%(10**8, 1))]"),
    ("simple_javascript", ("f(x=" + PUNCTUATION)[:MAX_OUTPUT_CHARS]),
    ("simple_java", ("a.b(x=" + PUNCTUATION)[:MAX_OUTPUT_CHARS]),
    ("parallel", "[" + "f(x=1)," * ((MAX_OUTPUT_CHARS - 2) // 7) + "]"),
    ("simple_javascript", "f(x=" + PUNCTUATION * 4),
]


def gold_results(style: str) -> dict[str, list[dict[str, str]]]:
    render = render_prompt_answer if style == "prompt" else render_json_answer
    return {c: [{"id": e["id"], "result": render(e, c)} for e in load_category(c)] for c in CATEGORIES}


def score_all(results: dict[str, list[dict[str, str]]], style: str) -> dict[str, float]:
    return {c: accuracy(score_results(c, rows, output_format=style)) for c, rows in results.items()}


def time_adversarial() -> tuple[float, float, str]:
    """(total s, worst s, worst raw output's head) over `ADVERSARIAL`, scored against each category's first entry."""
    worst, worst_head, total = 0.0, "", 0.0
    for category, raw in ADVERSARIAL:
        entry = load_category(category)[0]
        start = time.perf_counter()
        score_entry(entry, category, raw)
        seconds = time.perf_counter() - start
        total += seconds
        if seconds > worst:
            worst, worst_head = seconds, f"{category}: {raw[:24]!r}... ({len(raw)} chars)"
    return total, worst, worst_head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--style", choices=("prompt", "json"), default="prompt", help="output style to render and decode"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed repeats; the best is reported")
    args = parser.parse_args()

    start = time.perf_counter()
    results = gold_results(args.style)
    prepare_s = time.perf_counter() - start
    timings = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        accuracies = score_all(results, args.style)
        timings.append(time.perf_counter() - start)

    for category, value in accuracies.items():
        print(f"{category:<18} {len(results[category]):>4} outputs  accuracy {value:.4f}")
    print(f"overall_accuracy_non_live {aggregate(accuracies)['overall_accuracy_non_live']:.4f}")
    print(f"load+render {prepare_s:.3f} s")
    total = sum(len(rows) for rows in results.values())
    print(f"scored {total} outputs in {min(timings):.3f} s (best of {args.repeat}; target < 2 s)")
    adversarial_s, worst_s, worst = time_adversarial()
    print(
        f"adversarial corpus: {len(ADVERSARIAL)} outputs in {adversarial_s:.3f} s (target < 2 s); "
        f"worst {worst_s:.3f} s, {worst}"
    )


if __name__ == "__main__":
    main()
