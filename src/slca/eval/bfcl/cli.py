"""`slca bfcl score`: score a results file on one BFCL category and write verdict lines.

    python -m slca.eval.bfcl.cli score --category simple_python --results R.jsonl --out V.jsonl

Result lines are `{"id": ..., "result": "<raw model output>"}` (ids may repeat); one verdict
line `{"id", "valid", "error_type"}` is written per result line, in order, and the category
accuracy is printed last. A malformed results file exits with status 2 and one line naming the
file and line.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from slca.eval.bfcl.data import CATEGORIES, check_category, load_category
from slca.eval.bfcl.score import accuracy, score_results

bfcl_app = typer.Typer(help="Berkeley Function Calling Leaderboard (v4, non-live AST) scoring.", no_args_is_help=True)

OUTPUT_FORMATS = ("auto", "prompt", "json")


@bfcl_app.callback()
def bfcl_group() -> None:
    """Berkeley Function Calling Leaderboard (v4, non-live AST) scoring."""


class ResultsFileError(ValueError):
    """A results file that cannot be scored; the message names the file and line."""


def read_results(path: Path, category: str) -> list[dict[str, Any]]:
    """Read `{"id", "result"}` lines, checking shape and ids against the category."""
    known = {entry["id"] for entry in load_category(category)}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read results file ({exc.strerror or exc})") from exc
    results = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsFileError(f"{where}: not valid JSON ({exc.msg})") from exc
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(item.get("result"), str):
            raise ResultsFileError(f'{where}: expected an object {{"id": str, "result": str}}')
        if item["id"] not in known:
            raise ResultsFileError(f"{where}: unknown id {item['id']!r} for category {category}")
        results.append({"id": item["id"], "result": item["result"]})
    if not results:
        raise ResultsFileError(f"{path}: no result lines")
    return results


def write_lines_atomically(path: Path, lines: list[dict[str, Any]]) -> None:
    """Write JSON lines to a temporary file beside `path`, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as tmp:
            tmp.writelines(json.dumps(line) + "\n" for line in lines)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


@bfcl_app.command("score")
def score(
    category: Annotated[str, typer.Option(help=f"BFCL category: one of {', '.join(CATEGORIES)}.")],
    results: Annotated[Path, typer.Option(help='JSONL of {"id", "result"} lines holding raw model outputs.')],
    out: Annotated[
        Path, typer.Option(help='Verdict JSONL to write: one {"id", "valid", "error_type"} per result line.')
    ],
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            help=(
                "How outputs are decoded: prompt (calls such as f(a=1) in the category's language), json "
                "(<tool_call> blocks), or auto (json when a <tool_call> tag is present)."
            ),
        ),
    ] = "auto",
) -> None:
    """Score raw model outputs on one BFCL category with the official AST rules."""
    try:
        check_category(category)
        if output_format not in OUTPUT_FORMATS:
            raise ValueError(f"unknown --format {output_format!r}; expected one of {', '.join(OUTPUT_FORMATS)}")
        items = read_results(results, category)
    except (ValueError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from None
    verdicts = score_results(category, items, output_format=output_format)
    write_lines_atomically(out, [v.to_line() for v in verdicts])
    correct = sum(v.valid for v in verdicts)
    typer.echo(f"wrote {len(verdicts)} verdicts to {out}")
    typer.echo(f"{category} accuracy: {accuracy(verdicts):.4f} ({correct}/{len(verdicts)})")


if __name__ == "__main__":
    bfcl_app()
