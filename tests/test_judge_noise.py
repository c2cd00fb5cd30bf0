"""The noisy training judge behind rewards.summary_noise: seeded, clipped, off by default."""

from __future__ import annotations

import statistics

from policy_fixtures import small_params

from slca.config import Params
from slca.train.judge_noise import NoisyJudge, training_judge


class Constant:
    failures = "counter"

    def __init__(self, value: float) -> None:
        self.value = value

    def score(self, summary, tool_responses, reference, request):
        return self.value


def grades(judge, n=2000):
    return [judge.score("s", [], [], "r") for _ in range(n)]


def test_noise_is_seeded_clipped_and_centred():
    first, again = grades(NoisyJudge(Constant(0.5), 0.3, seed=1)), grades(NoisyJudge(Constant(0.5), 0.3, seed=1))
    other = grades(NoisyJudge(Constant(0.5), 0.3, seed=2))
    assert first == again and first != other
    assert all(0.0 <= g <= 1.0 for g in first)
    assert abs(statistics.mean(first) - 0.5) < 0.03 and 0.2 < statistics.stdev(first) < 0.35
    high = grades(NoisyJudge(Constant(1.0), 0.3, seed=1))
    assert max(high) == 1.0 and statistics.mean(high) < 1.0  # clipping at the top
    assert NoisyJudge(Constant(0.5), 0.3, seed=1).failures == "counter"  # counters of the wrapped judge


def test_training_judge_is_clean_unless_noise_is_set():
    assert not isinstance(training_judge(small_params(), seed=0), NoisyJudge)
    noisy = Params.model_validate({**small_params().model_dump(mode="json"), "rewards": {"summary_noise": 0.2}})
    assert isinstance(training_judge(noisy, seed=0), NoisyJudge)
