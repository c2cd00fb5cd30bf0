"""Time BFCL scoring: score the gold answers of all seven vendored categories (target < 2 s).

    python benchmarks/bfcl_score.py [--style prompt|json] [--repeat 3]

Gold answers are rendered once (not timed); the timed part is decoding + checking every entry
(1,390 outputs), with the category data already loaded. Prints per-category accuracy and the
best wall time over the repeats.
"""

from __future__ import annotations

import argparse
import time

from slca.eval.bfcl import CATEGORIES, accuracy, aggregate, load_category, score_results
from slca.eval.bfcl.render import render_json_answer, render_prompt_answer


def gold_results(style: str) -> dict[str, list[dict[str, str]]]:
    render = render_prompt_answer if style == "prompt" else render_json_answer
    return {c: [{"id": e["id"], "result": render(e, c)} for e in load_category(c)] for c in CATEGORIES}


def score_all(results: dict[str, list[dict[str, str]]], style: str) -> dict[str, float]:
    return {c: accuracy(score_results(c, rows, output_format=style)) for c, rows in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", choices=("prompt", "json"), default="prompt", help="output style to render and decode")
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


if __name__ == "__main__":
    main()
