"""Score raw model outputs on a BFCL category and aggregate category accuracies like the leaderboard.

`score_results(category, [{"id", "result"}, ...])` gives one `Verdict` per result, in order;
`aggregate({category: accuracy})` gives the non-live summary the leaderboard reports;
`measured(summary, categories)` keeps the entries whose categories were all run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from slca.eval.bfcl.checker import ast_check
from slca.eval.bfcl.data import category_language, check_category, load_category
from slca.eval.bfcl.decode import decode_output, is_call_list, is_empty_call_list


@dataclass(frozen=True)
class Verdict:
    """Outcome for one result line; `error_type` is BFCL's name for the failure (None if valid)."""

    id: str
    valid: bool
    error_type: str | None
    error: list[Any] = field(default_factory=list, compare=False)

    def to_line(self) -> dict[str, Any]:
        """The verdict line written by `slca bfcl score`."""
        return {"id": self.id, "valid": self.valid, "error_type": self.error_type}


def score_irrelevance(entry_id: str, raw: str, output_format: str = "auto") -> Verdict:
    """Valid iff the output holds no call: decoding fails or yields nothing."""
    try:
        decoded, _ = decode_output(raw, "Python", output_format)
    except Exception:  # noqa: BLE001 - any decoder failure means "no call"
        return Verdict(entry_id, True, None)
    if is_empty_call_list(decoded):
        return Verdict(entry_id, True, None)
    return Verdict(
        entry_id,
        False,
        "irrelevance_error:decoder_success",
        ["Valid syntax. Successfully decode AST when it should not."],
    )


def score_entry(
    entry: dict[str, Any], category: str, raw: str, output_format: str = "auto", underscore_to_dot: bool | None = None
) -> Verdict:
    """Score one raw output against one BFCL entry.

    `underscore_to_dot` None means: compare `a_b` for a function named `a.b` exactly when the
    output was decoded from `<tool_call>` JSON (the tools offered then had dots replaced).
    """
    if category == "irrelevance":
        return score_irrelevance(entry["id"], raw, output_format)
    language = category_language(category)
    try:
        decoded, used_format = decode_output(raw, language, output_format)
    except Exception as exc:  # noqa: BLE001 - any decoder failure is BFCL's decoder_failed
        return Verdict(
            entry["id"], False, "ast_decoder:decoder_failed", [f"Invalid syntax. Failed to decode AST. {exc}"]
        )
    if not is_call_list(decoded):
        return Verdict(
            entry["id"], False, "ast_decoder:decoder_wrong_output_format", ["Did not output in the specified format."]
        )
    to_dot = used_format == "json" if underscore_to_dot is None else underscore_to_dot
    try:
        result = ast_check(entry["function"], decoded, entry["ground_truth"], language, category, to_dot)
    except Exception as exc:  # noqa: BLE001 - the reference checker would abort the run; record it instead
        return Verdict(entry["id"], False, "ast_checker:exception", [f"{type(exc).__name__}: {exc}"])
    if result["valid"]:
        return Verdict(entry["id"], True, None)
    return Verdict(entry["id"], False, result["error_type"], list(result["error"]))


def score_results(
    category: str, results: list[dict[str, Any]], output_format: str = "auto", underscore_to_dot: bool | None = None
) -> list[Verdict]:
    """One verdict per `{"id", "result"}` item, in order; ids may repeat, unknown ids raise KeyError."""
    entries = {entry["id"]: entry for entry in load_category(check_category(category))}
    verdicts = []
    for item in results:
        entry = entries.get(item["id"])
        if entry is None:
            raise KeyError(f"id {item['id']!r} is not a {category} entry")
        verdicts.append(score_entry(entry, category, item["result"], output_format, underscore_to_dot))
    return verdicts


def accuracy(verdicts: list[Verdict]) -> float:
    """Fraction of valid verdicts (0.0 for none)."""
    return sum(v.valid for v in verdicts) / len(verdicts) if verdicts else 0.0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


_SIMPLE = ("simple_python", "simple_java", "simple_javascript")
_AST = (*_SIMPLE, "multiple", "parallel", "parallel_multiple")


def aggregate(per_category_accuracy: dict[str, float]) -> dict[str, float]:
    """The leaderboard's non-live summary from per-category accuracies in [0, 1].

    As on the leaderboard, a missing category counts as 0 and every mean is unweighted:
    simple = mean(simple_python, simple_java, simple_javascript); overall_non_live =
    summary_ast_non_live = mean(simple, multiple, parallel, parallel_multiple); irrelevance is
    reported on its own (it enters only the hallucination columns).
    """
    for name in per_category_accuracy:
        check_category(name)
    score = {name: float(per_category_accuracy.get(name, 0.0)) for name in (*_AST, "irrelevance")}
    simple = _mean([score[name] for name in _SIMPLE])
    summary = _mean([simple, score["multiple"], score["parallel"], score["parallel_multiple"]])
    return {
        "overall_accuracy_non_live": summary,
        "summary_ast_non_live": summary,
        "simple_ast_non_live": simple,
        "python_simple_ast_non_live": score["simple_python"],
        "java_simple_ast_non_live": score["simple_java"],
        "javascript_simple_ast_non_live": score["simple_javascript"],
        "multiple_ast_non_live": score["multiple"],
        "parallel_ast_non_live": score["parallel"],
        "parallel_multiple_ast_non_live": score["parallel_multiple"],
        "irrelevance_non_live": score["irrelevance"],
    }


# each `aggregate` entry -> the categories it averages
AGGREGATE_INPUTS: dict[str, tuple[str, ...]] = {
    "overall_accuracy_non_live": _AST,
    "summary_ast_non_live": _AST,
    "simple_ast_non_live": _SIMPLE,
    "python_simple_ast_non_live": ("simple_python",),
    "java_simple_ast_non_live": ("simple_java",),
    "javascript_simple_ast_non_live": ("simple_javascript",),
    "multiple_ast_non_live": ("multiple",),
    "parallel_ast_non_live": ("parallel",),
    "parallel_multiple_ast_non_live": ("parallel_multiple",),
    "irrelevance_non_live": ("irrelevance",),
}


def measured(summary: dict[str, float], categories_run: Iterable[str]) -> dict[str, float]:
    """The entries of an `aggregate` summary whose every category was run. The leaderboard counts a missing
    category as 0, which ranks a partial submission fairly but reads as a result where a run left the category
    out on purpose (an ablation that runs irrelevance alone would log an overall accuracy of 0.0)."""
    ran = set(categories_run)
    return {key: value for key, value in summary.items() if set(AGGREGATE_INPUTS.get(key, (key,))) <= ran}


def verdict_dict(verdict: Verdict) -> dict[str, Any]:
    """Full verdict including the checker's error messages."""
    return asdict(verdict)
