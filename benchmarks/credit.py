"""Time the `slca` advantage estimator against `grpo` on a realistic batch.

256 rollouts × 1024 tokens in groups of 8; each response is 1–3 tool turns (learned runs of
20–80 tokens) interleaved with tool responses (40–160 masked tokens), then a summary run of
30–200 tokens and padding; about 1 in 8 rollouts answers directly (summary only). Prints the
median time of each estimator in µs over many repeats and the slca/grpo ratio (target ≤ 1.5).

    python benchmarks/credit.py [--repeats 300] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from slca.credit import compute_advantages, segment_masks


def realistic_masks(batch: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """Response masks [B, T] with multi-run tool turns, env gaps, a summary run and padding."""

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high + 1, (1,), generator=generator))

    mask = torch.zeros(batch, length, dtype=torch.long)
    for b in range(batch):  # data generation only; the timed code is loop-free
        position = 0
        turns = 0 if draw(1, 8) == 1 else draw(1, 3)
        for _ in range(turns):
            run = draw(20, 80)
            mask[b, position : position + run] = 1
            position += run + draw(40, 160)
        mask[b, position : min(length, position + draw(30, 200))] = 1
    return mask


def median_us(candidates: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median µs per candidate; calls are interleaved so machine load hits all of them alike."""
    for fn in candidates.values():  # warm-up
        for _ in range(10):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter_ns()
            fn()
            samples[name].append((time.perf_counter_ns() - start) / 1e3)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(args.seed)
    tool, summary = segment_masks(realistic_masks(args.batch, args.length, generator))
    r_tool = torch.rand(args.batch, generator=generator)
    r_sum = torch.rand(args.batch, generator=generator)
    groups = torch.arange(args.batch) // args.group
    learned = tool | summary
    times = median_us(
        {
            "grpo": lambda: compute_advantages("grpo", r_tool, r_sum, tool, summary, groups),
            "slca": lambda: compute_advantages("slca", r_tool, r_sum, tool, summary, groups),
            "segment_masks": lambda: segment_masks(learned),
        },
        args.repeats,
    )
    print(
        f"batch {args.batch} x {args.length} tokens, groups of {args.group}, "
        f"{torch.get_num_threads()} threads, median of {args.repeats}"
    )
    print(f"grpo          {times['grpo']:10.1f} us")
    print(f"slca          {times['slca']:10.1f} us")
    print(f"ratio         {times['slca'] / times['grpo']:10.2f} x  (target <= 1.5)")
    print(f"segment_masks {times['segment_masks']:10.1f} us")


if __name__ == "__main__":
    main()
