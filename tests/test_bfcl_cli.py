"""`slca bfcl score` end to end: verdict file, accuracy line, and clear errors on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from slca.eval.bfcl.cli import bfcl_app

runner = CliRunner()
GOOD = "[calculate_triangle_area(base=10, height=5)]"


def write_results(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def score(tmp_path: Path, results: Path, category: str = "simple_python", *extra: str):
    out = tmp_path / "verdicts.jsonl"
    args = ["score", "--category", category, "--results", str(results), "--out", str(out), *extra]
    return runner.invoke(bfcl_app, args), out


def test_score_writes_one_verdict_per_line_in_order(tmp_path: Path) -> None:
    results = write_results(
        tmp_path / "r.jsonl",
        [
            {"id": "simple_python_0", "result": GOOD},
            {"id": "simple_python_0", "result": "I don't know."},
            {"id": "simple_python_0", "result": GOOD.replace("10", "11")},
        ],
    )
    result, out = score(tmp_path, results)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == [
        {"id": "simple_python_0", "valid": True, "error_type": None},
        {"id": "simple_python_0", "valid": False, "error_type": "ast_decoder:decoder_failed"},
        {"id": "simple_python_0", "valid": False, "error_type": "value_error:others"},
    ]
    assert result.output.strip().splitlines()[-1] == "simple_python accuracy: 0.3333 (1/3)"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_format_option_forces_the_decoder(tmp_path: Path) -> None:
    call = '<tool_call>\n{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}\n</tool_call>'
    results = write_results(tmp_path / "r.jsonl", [{"id": "simple_python_0", "result": call}])
    assert score(tmp_path, results)[0].output.strip().endswith("(1/1)")
    _, out = score(tmp_path, results, "simple_python", "--format", "prompt")
    assert json.loads(out.read_text())["error_type"] == "ast_decoder:decoder_failed"
    assert score(tmp_path, results, "simple_python", "--format", "xml")[0].exit_code == 2


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    results = write_results(tmp_path / "r.jsonl", [{"id": "simple_python_0", "result": GOOD}, "{not json"])
    result, out = score(tmp_path, results)
    assert result.exit_code == 2
    assert f"{results}:2: not valid JSON" in result.output
    assert not out.exists()


def test_wrong_shape_unknown_id_and_category_are_clear_errors(tmp_path: Path) -> None:
    shape = write_results(tmp_path / "a.jsonl", [{"id": "simple_python_0", "output": GOOD}])
    result, _ = score(tmp_path, shape)
    assert result.exit_code == 2 and f"{shape}:1: expected an object" in result.output
    unknown = write_results(
        tmp_path / "b.jsonl", [{"id": "simple_python_0", "result": GOOD}, {"id": "simple_java_0", "result": GOOD}]
    )
    result, _ = score(tmp_path, unknown)
    assert (
        result.exit_code == 2 and f"{unknown}:2: unknown id 'simple_java_0' for category simple_python" in result.output
    )
    result, _ = score(tmp_path, unknown, "live_simple")
    assert result.exit_code == 2 and "unknown BFCL category 'live_simple'" in result.output
    result, _ = score(tmp_path, tmp_path / "missing.jsonl")
    assert result.exit_code == 2 and "missing.jsonl: cannot read results file" in result.output


def test_module_entry_point_runs(tmp_path: Path) -> None:
    results = write_results(tmp_path / "r.jsonl", [{"id": "irrelevance_0", "result": "No function fits."}])
    out = tmp_path / "v.jsonl"
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "slca.eval.bfcl.cli",
            "score",
            "--category",
            "irrelevance",
            "--results",
            str(results),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "irrelevance accuracy: 1.0000 (1/1)"
    assert json.loads(out.read_text()) == {"id": "irrelevance_0", "valid": True, "error_type": None}
