"""great-expectations suite over the synthesized task splits.

Rows are flattened into one pandas frame per split: plain columns (id, kind, domain, prompt, …)
plus boolean columns computed here with jsonschema and set logic (gold calls offered, arguments
valid, no held-out leakage, …) that the suite expects to be all true. One ephemeral GX context,
one validation per split; a failed split raises `DataValidationError` whose message names each
failed expectation, its column and a few offending row ids.

    report = validate_splits({"train": rows, "val": rows, "test": rows})
    raise_for_report(report)  # DataValidationError when any split failed
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import jsonschema

KINDS = ("single", "parallel", "multiple", "multi_step", "no_call")
SPLITS = ("train", "val", "test")
MAX_SUMMARY_CHARS = 1200
EXAMPLES_SHOWN = 3


class DataValidationError(ValueError):
    """Synthesized or stored task rows broke the expectation suite; message lists the failures."""

    def __init__(self, message: str, report: dict | None = None) -> None:
        super().__init__(message)
        self.report = report or {}


# ---- flattening: one row dict -> one record of plain and boolean columns ----


def _validator(parameters: dict) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(parameters, default=jsonschema.Draft202012Validator)
    return cls(parameters, format_checker=cls.FORMAT_CHECKER)


class _SchemaCache:
    """Compiled validators keyed by the parameters schema text (rows repeat the same tools)."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def valid(self, parameters: dict, arguments: Any) -> bool:
        key = json.dumps(parameters, sort_keys=True)
        if key not in self._cache:
            try:
                self._cache[key] = _validator(parameters)
            except jsonschema.SchemaError:
                self._cache[key] = None
        validator = self._cache[key]
        return validator is not None and isinstance(arguments, dict) and validator.is_valid(arguments)


def offered_tools(row: Mapping) -> dict[str, dict]:
    """name -> parameters schema of the tools offered in a row (malformed entries skipped)."""
    out: dict[str, dict] = {}
    for entry in row.get("tools") or []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out[function["name"]] = function.get("parameters")
    return out


def gold_calls(row: Mapping) -> list[dict]:
    return [call for step in row.get("gold_steps") or [] for call in (step or [])]


def prompt_text(row: Mapping) -> str:
    """What the policy reads before answering: system and user contents plus the offered tool schemas."""
    texts = [str(m.get("content", "")) for m in row.get("messages") or [] if isinstance(m, dict)]
    texts += [json.dumps(t, sort_keys=True, separators=(",", ":")) for t in row.get("tools") or []]
    return "\n".join(texts)


def _messages_ok(row: Mapping) -> bool:
    messages = row.get("messages") or []
    roles = [m.get("role") for m in messages if isinstance(m, dict)]
    return roles == ["system", "user"] and all(str(m.get("content", "")).strip() for m in messages)


def _tools_ok(row: Mapping) -> bool:
    tools = row.get("tools") or []
    names = list(offered_tools(row))
    return (
        len(tools) >= 1
        and len(names) == len(tools)
        and len(set(names)) == len(names)
        and all(t.get("type") == "function" and isinstance(t["function"].get("parameters"), dict) for t in tools)
    )


def _shape_ok(row: Mapping) -> bool:
    """Gold steps/responses align and fit the kind (no_call: none; multi_step: several steps)."""
    steps, responses = row.get("gold_steps"), row.get("gold_responses")
    if not isinstance(steps, list) or not isinstance(responses, list) or len(steps) != len(responses):
        return False
    if any(
        not isinstance(s, list) or not isinstance(r, list) or len(s) != len(r) or not s
        for s, r in zip(steps, responses)
    ):
        return False
    calls = gold_calls(row)
    if not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls):
        return False
    kind = row.get("kind")
    expected = {
        "no_call": len(steps) == 0,
        "single": len(steps) == 1 and len(calls) == 1,
        "multiple": len(steps) == 1 and len(calls) == 1,
        "parallel": len(steps) == 1 and len(calls) >= 2 and len({c["name"] for c in calls}) == 1,
        "multi_step": len(steps) >= 2,
    }
    return expected.get(kind, False)


def _reference_stated(row: Mapping) -> bool:
    summary = str(row.get("gold_summary", "")).lower()
    reference = row.get("reference")
    return isinstance(reference, list) and all(str(fact).lower() in summary for fact in reference)


def flatten_row(row: Mapping, schemas: _SchemaCache) -> dict:
    """The columns the suite checks for one task row."""
    tools = offered_tools(row)
    calls = gold_calls(row)
    return {
        "id": str(row.get("id", "")),
        "split": row.get("split"),
        "kind": row.get("kind"),
        "domain": row.get("domain"),
        "template_id": str(row.get("template_id", "")),
        "prompt": prompt_text(row),
        "gold_summary": str(row.get("gold_summary", "")),
        "n_tools": len(row.get("tools") or []),
        "n_gold_calls": len(calls),
        "messages_ok": _messages_ok(row),
        "tools_ok": _tools_ok(row),
        "gold_shape_ok": _shape_ok(row),
        "gold_calls_offered": all(c.get("name") in tools for c in calls),
        "gold_args_valid": all(
            c.get("name") in tools and schemas.valid(tools[c["name"]], c.get("arguments")) for c in calls
        ),
        "reference_stated": _reference_stated(row),
    }


def leakage_sets(rows_by_split: Mapping[str, list[dict]]) -> dict[str, tuple[set, set]]:
    """Per split, the templates and entities it must not use: test vs train+val, and back."""
    templates = {split: {r.get("template_id") for r in rows} for split, rows in rows_by_split.items()}
    entities = {split: {e for r in rows for e in r.get("entities") or []} for split, rows in rows_by_split.items()}

    def union(table: dict[str, set], splits: list[str]) -> set:
        return set().union(*(table[s] for s in splits))

    seen = [s for s in rows_by_split if s != "test"]
    held = [s for s in rows_by_split if s == "test"]
    return {
        split: (union(templates, seen), union(entities, seen))
        if split == "test"
        else (union(templates, held), union(entities, held))
        for split in rows_by_split
    }


def flatten_splits(rows_by_split: Mapping[str, list[dict]]) -> dict[str, list[dict]]:
    """Records per split, with the cross-split columns (global id uniqueness, leakage flags)."""
    schemas = _SchemaCache()
    id_counts = Counter(str(r.get("id", "")) for rows in rows_by_split.values() for r in rows)
    forbidden = leakage_sets(rows_by_split)
    out: dict[str, list[dict]] = {}
    for split, rows in rows_by_split.items():
        templates, entities = forbidden[split]
        records = []
        for row in rows:
            record = flatten_row(row, schemas)
            record["id_unique_across_splits"] = id_counts[record["id"]] == 1
            record["template_not_leaked"] = record["template_id"] not in templates
            record["entities_not_leaked"] = not entities.intersection(row.get("entities") or [])
            records.append(record)
        out[split] = records
    return out


# ---- the suite ----

FLAG_COLUMNS = (
    "messages_ok",
    "tools_ok",
    "gold_shape_ok",
    "gold_calls_offered",
    "gold_args_valid",
    "reference_stated",
    "id_unique_across_splits",
    "template_not_leaked",
    "entities_not_leaked",
)


def build_expectations(
    split: str, required_kinds: Iterable[str], domains: Iterable[str], max_prompt_chars: int
) -> list:
    """The expectations one split must meet."""
    import great_expectations as gx

    E = gx.expectations
    suite = [
        E.ExpectColumnValuesToBeUnique(column="id"),
        E.ExpectColumnValuesToBeInSet(column="split", value_set=[split]),
        E.ExpectColumnValuesToBeInSet(column="kind", value_set=list(KINDS)),
        E.ExpectColumnValuesToBeInSet(column="domain", value_set=sorted(domains)),
        E.ExpectColumnDistinctValuesToContainSet(column="kind", value_set=sorted(required_kinds)),
        E.ExpectColumnDistinctValuesToContainSet(column="domain", value_set=sorted(domains)),
        E.ExpectColumnValueLengthsToBeBetween(column="prompt", min_value=10, max_value=max_prompt_chars),
        E.ExpectColumnValueLengthsToBeBetween(column="template_id", min_value=1, max_value=200),
        E.ExpectColumnValueLengthsToBeBetween(column="gold_summary", min_value=10, max_value=MAX_SUMMARY_CHARS),
    ]
    suite += [E.ExpectColumnValuesToBeInSet(column=col, value_set=[True]) for col in FLAG_COLUMNS]
    return suite


def _gx_context() -> Any:
    os.environ["GX_ANALYTICS_ENABLED"] = "False"  # no network calls from validation
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


def _short(value: Any, limit: int = 80) -> Any:
    """A JSON-ready, bounded rendering of a reported value (numpy scalars become Python ones)."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, (list, tuple)):
        return [_short(v, limit) for v in value]
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]}… ({len(value)} chars)"
    return value


def summarize_result(result: Any) -> dict:
    """A deterministic, JSON-ready digest of one expectation result."""
    config = result.expectation_config
    kwargs = {k: v for k, v in config.kwargs.items() if k != "batch_id"}
    column = kwargs.get("column")
    info = result.result or {}
    entry = {
        "expectation": config.type,
        "column": column,
        "success": bool(result.success),
        "kwargs": {k: _short(v) for k, v in kwargs.items()},
    }
    if "unexpected_count" in info:
        index = info.get("unexpected_index_list") or []
        entry["element_count"] = info.get("element_count")
        entry["unexpected_count"] = info.get("unexpected_count")
        entry["unexpected_ids"] = [str(item.get("id")) for item in index[:EXAMPLES_SHOWN]]
        entry["unexpected_values"] = [_short(item.get(column)) for item in index[:EXAMPLES_SHOWN]]
    if "partial_missing_list" in info or "observed_value" in info:
        entry["missing"] = list(info.get("partial_missing_list") or [])
    if result.exception_info and result.exception_info.get("raised_exception"):
        entry["exception"] = str(result.exception_info.get("exception_message"))
    return entry


def validate_splits(
    rows_by_split: Mapping[str, list[dict]],
    *,
    domains: Iterable[str],
    required_kinds: Iterable[str] = KINDS,
    max_prompt_chars: int = 8000,
) -> dict:
    """Run the suite on every split; returns the report (success, per-split results, seconds)."""
    import pandas as pd

    started = time.perf_counter()
    records = flatten_splits(rows_by_split)
    context = _gx_context()
    import great_expectations as gx

    asset = context.data_sources.add_pandas("tasks").add_dataframe_asset(name="rows")
    batch = asset.add_batch_definition_whole_dataframe("split")
    report: dict = {"success": True, "splits": {}}
    result_format = {"result_format": "COMPLETE", "unexpected_index_column_names": ["id"]}
    for split, split_records in records.items():
        suite = context.suites.add(gx.ExpectationSuite(name=f"tasks_{split}"))
        for expectation in build_expectations(split, required_kinds, domains, max_prompt_chars):
            suite.add_expectation(expectation)
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"validate_{split}", data=batch, suite=suite)
        )
        frame = pd.DataFrame.from_records(split_records, columns=list(_columns(split_records)))
        result = definition.run(batch_parameters={"dataframe": frame}, result_format=result_format)
        entries = [summarize_result(r) for r in result.results]
        report["splits"][split] = {
            "success": bool(result.success),
            "rows": len(split_records),
            "evaluated": len(entries),
            "failed": sum(not e["success"] for e in entries),
            "results": entries,
        }
        report["success"] = report["success"] and bool(result.success)
    report["seconds"] = round(time.perf_counter() - started, 3)
    return report


def _columns(records: list[dict]) -> list[str]:
    if records:
        return list(records[0])
    return ["id", "split", "kind", "domain", "template_id", "prompt", "gold_summary", *FLAG_COLUMNS]


def failure_lines(report: Mapping) -> list[str]:
    """One readable line per failed expectation: split, name, column, offending ids/values."""
    lines = []
    for split, outcome in report.get("splits", {}).items():
        for entry in outcome["results"]:
            if entry["success"]:
                continue
            line = f"{split}: {entry['expectation']} on column '{entry['column']}'"
            if entry.get("unexpected_count"):
                pairs = ", ".join(f"{i}={v!r}" for i, v in zip(entry["unexpected_ids"], entry["unexpected_values"]))
                line += f" failed for {entry['unexpected_count']}/{entry['element_count']} rows, e.g. {pairs}"
            elif entry.get("missing"):
                line += f" is missing {entry['missing']}"
            elif entry.get("exception"):
                line += f" raised: {entry['exception']}"
            lines.append(line)
    return lines


def raise_for_report(report: Mapping, where: str = "task data") -> None:
    """DataValidationError listing every failed expectation when the report is not a success."""
    if report.get("success"):
        return
    lines = failure_lines(report) or ["validation failed without a failed expectation listed"]
    # the first line stands alone (the CLI prints only it); the rest lists every failure
    head = f"{where} failed validation ({len(lines)} failed expectation(s)); first: {lines[0]}"
    raise DataValidationError(head + "\n  " + "\n  ".join(lines), dict(report))
