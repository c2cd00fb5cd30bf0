"""BFCL v4 (non-live AST) scoring, faithful to the official checker, plus generation helpers.

- `score_results(category, [{"id", "result"}])` -> `[Verdict(id, valid, error_type)]`
- `load_category(category)` -> entries from `vendor/bfcl/`
- `aggregate({category: accuracy})` -> the leaderboard's non-live summary; `measured(summary, run)` keeps
  the entries whose categories were all run
- `bfcl_to_openai_tools`, `bfcl_questions_to_messages`, `run_generation` for running a policy
- `bfcl_app`: the Typer sub-app behind `slca bfcl score`
"""

from slca.eval.bfcl.data import CATEGORIES, category_language, load_category
from slca.eval.bfcl.generation import (
    bfcl_questions_to_messages,
    bfcl_to_openai_tools,
    entry_tools,
    language_specific_functions,
    run_generation,
)
from slca.eval.bfcl.score import (
    Verdict,
    accuracy,
    aggregate,
    measured,
    score_entry,
    score_results,
)

__all__ = [
    "CATEGORIES",
    "Verdict",
    "accuracy",
    "aggregate",
    "bfcl_questions_to_messages",
    "bfcl_to_openai_tools",
    "category_language",
    "entry_tools",
    "language_specific_functions",
    "load_category",
    "measured",
    "run_generation",
    "score_entry",
    "score_results",
]
