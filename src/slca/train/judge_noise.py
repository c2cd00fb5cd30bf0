"""A noisy preference judge for training: the documented mechanism behind `rewards.summary_noise`.

SLCA's claim is that routing the summary advantage only to summary tokens keeps summary-reward
noise out of tool decisions. To test it, training can add seeded Gaussian noise to every judge
grade (clipped to [0, 1]); evaluation always uses the clean judge.

    judge = training_judge(params, seed=0)
"""

from __future__ import annotations

import random
from typing import Any


class NoisyJudge:
    """Wraps a judge: grade + N(0, std²), clipped to [0, 1]; one seeded stream per run."""

    def __init__(self, judge: Any, std: float, seed: int) -> None:
        self.judge, self.std = judge, float(std)
        self.rng = random.Random(f"summary-noise-{seed}")

    def score(
        self, summary: str, tool_responses: list[str], reference: list[str], request: str, **kwargs: Any
    ) -> float:
        grade = float(self.judge.score(summary, tool_responses, reference, request, **kwargs))
        return min(1.0, max(0.0, grade + self.rng.gauss(0.0, self.std)))

    def __getattr__(self, name: str) -> Any:  # counters, endpoints: those of the wrapped judge
        return getattr(self.judge, name)


def training_judge(params: Any, seed: int) -> Any:
    """The configured judge, made noisy when `rewards.summary_noise` > 0."""
    from slca.rollout.scoring import build_judge

    judge = build_judge(params)
    noise = float(params.rewards.summary_noise)
    return NoisyJudge(judge, noise, seed) if noise > 0 else judge
