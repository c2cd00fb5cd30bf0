"""Rule-based summary judge: faithful to the tool responses, covers the facts, concise.

    score = (w_f·faithfulness + w_c·coverage + w_n·coverage·concision) / (w_f + w_c + w_n)

The judge reads the rollout's own evidence: `tool_responses` are the responses the policy saw
and `reference` the facts the request asks for *as those responses state them*
(`slca.rewards.facts.observed_facts`), so a faithful summary of a simulated response scores as
well as one of a real response, and stating facts the tools never returned does not pay.

- faithfulness: of the claims the summary makes — every number and every capitalised word that
  does not start a sentence — the fraction found in a tool response or the request. A number is
  found when some source number rounds to it at the summary's precision (19.4 supports "19");
  a word when it occurs, case-folded, in the sources; each expected fact the summary states
  counts as one more supported claim. No claims → 1.0 when there is nothing to report (no
  expected facts: a refusal, an error), 0.0 otherwise: saying nothing is not faithful reporting.
- coverage: fraction of expected facts present in the summary; a fact is present when at
  least `fact_match_threshold` of its word/number tokens occur in the summary (numbers compared
  numerically). No expected facts → 1.0.
- concision: 1.0 up to `max_chars` characters, then falls linearly to 0 at twice that length;
  it is weighted by coverage, so brevity earns nothing for a reply that reports nothing.

A vacuous reply ("here is what the tool returned") therefore scores 0 whenever the responses
hold facts the user asked for.
"""

from __future__ import annotations

import re

from slca.rewards.facts import fact_tokens
from slca.rewards.preference import register_judge

_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?|\d+(?:\.\d+)?")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_COMMON_CAPITALISED = {
    "i",
    "i'm",
    "i've",
    "i'll",
    "ok",
    "okay",
    "yes",
    "no",
    "note",
    "sorry",
    "please",
}


def _to_float(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _decimals(text: str) -> int:
    return len(text.split(".", 1)[1]) if "." in text else 0


def summary_numbers(text: str) -> list[tuple[float, int]]:
    """(value, decimals written) of every number in `text`."""
    found = []
    for match in _NUMBER.finditer(text):
        value = _to_float(match.group())
        if value is not None:
            found.append((value, _decimals(match.group())))
    return found


def opens_sentence(text: str, position: int) -> bool:
    """True when only spacing, quotes or a bullet separate `position` from a sentence end."""
    prefix = text[:position].rstrip(" \t\"'([")
    if prefix.endswith(("-", "*", "•")):
        prefix = prefix[:-1].rstrip(" \t")
    return not prefix or prefix[-1] in ".!?:;\n"


def capitalised_claims(text: str) -> list[str]:
    """Capitalised words that do not open a sentence or bullet: names the summary asserts."""
    claims = []
    for match in _WORD.finditer(text):
        word = match.group()
        if not word[0].isupper() or word.lower() in _COMMON_CAPITALISED:
            continue
        if opens_sentence(text, match.start()):
            continue
        claims.append(word)
    return claims


def faithfulness(summary: str, sources: str, empty: float = 1.0, stated_facts: int = 0) -> float:
    """Fraction of the summary's claims that the sources support; `empty` if it makes none.

    Claims are its numbers and names, plus the `stated_facts` expected facts it states (those
    come from the observed responses, so they are supported: "the flight is scheduled" makes a
    claim even though it holds no number or name)."""
    source_numbers = [v for v, _ in summary_numbers(sources)]
    folded = sources.casefold()
    checks = [any(round(s, d) == round(v, d) for s in source_numbers) for v, d in summary_numbers(summary)]
    checks += [word.casefold() in folded for word in capitalised_claims(summary)]
    checks += [True] * stated_facts
    return sum(checks) / len(checks) if checks else empty


def coverage(summary: str, reference: list[str], threshold: float) -> float:
    """Fraction of reference facts whose tokens (≥ threshold of them) occur in the summary."""
    facts = [f for f in reference if fact_tokens(f)]
    if not facts:
        return 1.0
    present = set(fact_tokens(summary))
    hits = 0
    for fact in facts:
        tokens = fact_tokens(fact)
        hits += sum(t in present for t in tokens) / len(tokens) >= threshold
    return hits / len(facts)


def concision(summary: str, max_chars: int) -> float:
    """1.0 up to max_chars, then linearly down to 0 at 2·max_chars."""
    excess = len(summary) - max_chars
    return 1.0 if excess <= 0 else max(0.0, 1.0 - excess / max_chars)


@register_judge("rule")
class RuleJudge:
    """Deterministic judge from faithfulness, coverage and concision (module docstring)."""

    def __init__(
        self,
        w_faithfulness: float = 0.5,
        w_coverage: float = 0.4,
        w_concision: float = 0.1,
        max_chars: int = 600,
        fact_match_threshold: float = 0.75,
    ) -> None:
        total = w_faithfulness + w_coverage + w_concision
        if min(w_faithfulness, w_coverage, w_concision) < 0 or total <= 0:
            raise ValueError("rule judge weights must be non-negative with a positive sum")
        if max_chars <= 0 or not 0 < fact_match_threshold <= 1:
            raise ValueError("rule judge needs max_chars > 0 and 0 < fact_match_threshold <= 1")
        self.weights = (w_faithfulness / total, w_coverage / total, w_concision / total)
        self.max_chars = max_chars
        self.threshold = fact_match_threshold

    def components(
        self, summary: str, tool_responses: list[str], reference: list[str], request: str
    ) -> dict[str, float]:
        sources = "\n".join([*tool_responses, request])
        facts = [fact for fact in reference if fact_tokens(fact)]
        covered = coverage(summary, facts, self.threshold)
        stated = round(covered * len(facts))
        return {
            "faithfulness": faithfulness(summary, sources, empty=0.0 if facts else 1.0, stated_facts=stated),
            "coverage": covered,
            "concision": concision(summary, self.max_chars) * covered,
        }

    def score(self, summary: str, tool_responses: list[str], reference: list[str], request: str) -> float:
        parts = self.components(summary, tool_responses, reference, request)
        w_f, w_c, w_n = self.weights
        return w_f * parts["faithfulness"] + w_c * parts["coverage"] + w_n * parts["concision"]
