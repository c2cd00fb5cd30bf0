"""Seen against held-out phrasing: does what RL adds on validation carry over to the test split?

The experiment's learning curves read the first 40 validation tasks, whose phrasing templates and
entities the training split also uses; the test split's are held out (`data.heldout_template_fraction`,
`data.heldout_entity_fraction`). Every headline run gained several times more Success on those 40
tasks than on test. This probe evaluates saved policies on a larger validation sample with the
evaluate stage's own in-domain evaluation (greedy, real executors, the experiment's params) and sets
each RL policy's gain over the SFT start on validation beside its gain on the test split, read from
the experiment's committed evaluation reports; both with a paired bootstrap interval over tasks.

    .venv/bin/python scripts/seen_heldout_probe.py --model main/sft=models/experiment/sft \\
        --model abstain-baseline/slca-s2=models/experiment/abstain-baseline/slca-s2
    .venv/bin/python scripts/seen_heldout_probe.py --report      # rebuild reports/seen_heldout_probe.md

A model is named `<setting>/<run>` as in `reports/experiment/<setting>/eval/<run>.json` (the SFT start
is `main/sft`). A run's periodic checkpoint (its LoRA adapter) is named `<setting>/<run>@<step>` and
merged into its base in memory, as the run's end merges its policy; it has no test evaluation, and the
report sets it beside the run's last step on validation. A run trained with `train.keep_checkpoints` keeps
every checkpoint; otherwise the trainer keeps the newest two while it runs and none once it ends.

    .venv/bin/python scripts/seen_heldout_probe.py \
        --model budget-800/slca-s0@50=models/experiment/budget-800/slca-s0/checkpoints/checkpoint-50

Needs `data/val.jsonl` from the experiment's data params (`slca synthesize`).
Results: reports/seen_heldout_probe/<setting>__<run>[@<step>].json (committed) and reports/seen_heldout_probe.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
RESULTS = ROOT / "reports" / "seen_heldout_probe"
REPORT = ROOT / "reports" / "seen_heldout_probe.md"
EXPERIMENT = ROOT / "reports" / "experiment"
START = "main/sft"
CURVE_TASKS = 40  # the learning curves' validation sample (experiments/headline.yaml, train.val_tasks)


def parse_name(name: str) -> tuple[str, str, int | None]:
    """(setting, run, checkpoint step or None) of `<setting>/<run>[@<step>]`; a one-line error otherwise."""
    setting, _, rest = name.partition("/")
    run, at, step = rest.partition("@")
    if not setting or not run or "/" in rest or (at and not step.isdigit()):
        raise SystemExit(f"a model is named <setting>/<run> or <setting>/<run>@<step> (e.g. main/sft), got {name!r}")
    return setting, run, int(step) if at else None


def result_path(name: str, results: Path = RESULTS) -> Path:
    setting, run, step = parse_name(name)
    return results / f"{setting}__{run}{'' if step is None else f'@{step}'}.json"


def load_merged(path: Path, params: Any) -> tuple[Any, Any]:
    """A run's LoRA checkpoint merged into its base, as `save_policy` merges a run's policy at its end."""
    from slca.train.policy import load_policy

    model, tokenizer = load_policy(path, params)
    return model.merge_and_unload().eval(), tokenizer


def evaluate(name: str, path: Path, params_path: Path, val_tasks: int) -> None:
    import torch

    from slca.config import ParamsError, load_params
    from slca.eval.indomain import evaluate_loaded, evaluate_path
    from slca.train.sweep import apply_overrides

    checkpoint = parse_name(name)[2] is not None
    if checkpoint and not (path / "adapter_config.json").exists():
        raise SystemExit(f"{path} is not a LoRA checkpoint (no adapter_config.json), but {name} names a step")
    if not checkpoint and not (path / "config.json").exists():
        raise SystemExit(f"{path} is not a saved policy (no config.json)")
    try:
        params = apply_overrides(load_params(params_path), {"eval.n_test": val_tasks})
    except ParamsError as error:
        raise SystemExit(str(error)) from None
    split = ROOT / params.data.out_dir / "val.jsonl"
    if not split.exists():
        raise SystemExit(f"{split} is missing: run `slca synthesize --params {params_path}` first")
    torch.set_num_threads(2)
    began = time.perf_counter()
    if checkpoint:
        result = evaluate_loaded(*load_merged(path, params), params, split_path=split)
    else:
        result = evaluate_path(path, params, split_path=split)
    seconds = time.perf_counter() - began
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], check=False, capture_output=True, text=True, cwd=ROOT
    )
    out = {
        "model": name,
        "path": str(path),
        "params": str(params_path),
        "split": "val",
        "tasks": len(result["episodes"]),
        "seconds": round(seconds, 1),
        "commit": commit.stdout.strip(),
        "metrics": {key: result["metrics"][key] for key in ("success", "arg_match", "r_sum", "no_call_accuracy")},
        "episodes": result["episodes"],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    target = result_path(name)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    tmp.replace(target)
    print(f"{name}: val Success {out['metrics']['success']:.3f} on {out['tasks']} tasks, {seconds / 60:.1f} min")


def paired(rl: list[dict[str, Any]], start: list[dict[str, Any]]) -> tuple[int, float, float, float, float, float]:
    """(tasks, start mean, RL mean, RL − start and its 95 % interval) over the tasks both evaluated."""
    from slca.eval.experiment_report import episode_matrix, paired_bootstrap

    tasks, a = episode_matrix([{"indomain": {"episodes": rl}}], "success")
    _, b = episode_matrix([{"indomain": {"episodes": start}}], "success")
    diff, low, high = paired_bootstrap(a, b)
    return len(tasks), float(b.mean()), float(a.mean()), diff, low, high


def cell(values: tuple[int, float, float, float, float, float]) -> tuple[str, str]:
    _, start, rl, diff, low, high = values
    return f"{start:.3f} → {rl:.3f}", f"{diff:+.3f} [{low:+.3f}, {high:+.3f}]"


def curve_gain(history: Path, step: int | None = None) -> str:
    """The run's own learning curve: validation Success at its last point (or at `step`) − at step 0 (— where
    the history or that point is missing)."""
    if not history.exists():
        return "—"
    points = [json.loads(line) for line in history.read_text(encoding="utf-8").splitlines() if line.strip()]
    values = {point["step"]: point["val/success"] for point in points if "val/success" in point}
    if 0 not in values or len(values) < 2:
        return "—"
    at = max(values) if step is None else step
    return f"{values[at] - values[0]:+.3f}" if at in values and at != 0 else "—"


def report(results: Path = RESULTS, experiment: Path = EXPERIMENT) -> str:
    """The report's markdown from the probe's results and the experiment's committed test evaluations."""
    start_path = result_path(START, results)
    if not start_path.exists():
        raise SystemExit(f"{start_path} is missing: evaluate the SFT start ({START}) first")
    start = json.loads(start_path.read_text(encoding="utf-8"))
    start_test = json.loads((experiment / "main" / "eval" / "sft.json").read_text(encoding="utf-8"))
    lines = [
        "# Seen against held-out phrasing: RL's gain on validation and on test",
        "",
        (
            "Regenerated by `.venv/bin/python scripts/seen_heldout_probe.py --report` from "
            "`reports/seen_heldout_probe/*.json`. Validation tasks use the phrasing templates and entities of the "
            "training split; test tasks use held-out ones. Each policy is evaluated greedily with the real executors "
            "and the headline experiment's params; its test figures are its committed evaluation report "
            "(`reports/experiment/<setting>/eval/<run>.json`). Cells are the SFT start → the policy, and the policy − "
            f"the SFT start with a 95 % paired bootstrap interval over tasks (one seed each). The first {CURVE_TASKS} "
            "validation tasks are the learning curves' sample."
        ),
        "",
        (
            f"| policy | validation tasks | val Success | RL − SFT on val | RL − SFT on the first {CURVE_TASKS} "
            "| the run's curve, last − step 0 | test tasks | test Success | RL − SFT on test | minutes (val) |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = {}
    for path in sorted(results.glob("*.json")):
        if path == start_path:
            continue
        row = json.loads(path.read_text(encoding="utf-8"))
        rows[row["model"]] = row
        setting, run, step = parse_name(row["model"])
        test_cells = ["—", "—", "— (a checkpoint: not evaluated on test)"]
        if step is None:
            test_path = experiment / setting / "eval" / f"{run}.json"
            if not test_path.exists():
                raise SystemExit(f"{row['model']} has no committed test evaluation ({test_path})")
            test = json.loads(test_path.read_text(encoding="utf-8"))
            held = paired(test["indomain"]["episodes"], start_test["indomain"]["episodes"])
            test_cells = [str(held[0]), *cell(held)]
        val = paired(row["episodes"], start["episodes"])
        first = paired(row["episodes"][:CURVE_TASKS], start["episodes"][:CURVE_TASKS])
        val_means, val_diff = cell(val)
        lines.append(
            f"| {row['model']} | {val[0]} | {val_means} | {val_diff} | {cell(first)[1]} "
            f"| {curve_gain(experiment / setting / 'history' / f'{run}.jsonl', step)} | "
            + " | ".join(test_cells)
            + f" | {row['seconds'] / 60:.1f} |"
        )
    later = []
    for name, row in rows.items():
        setting, run, step = parse_name(name)
        final = rows.get(f"{setting}/{run}")
        if step is None or final is None:
            continue
        tasks, early, last, diff, low, high = paired(final["episodes"], row["episodes"])
        later.append(
            f"| {setting}/{run} | {step} | {tasks} | {early:.3f} → {last:.3f} | {diff:+.3f} [{low:+.3f}, {high:+.3f}] |"
        )
    if later:
        lines += [
            "",
            (
                "One run at two points: its last step against its checkpoint at an earlier step, on the same "
                "validation tasks (paired bootstrap, 95 %): what the steps between them added."
            ),
            "",
            "| run | earlier step | validation tasks | val Success, earlier → last | last − earlier |",
            "|---|---|---|---|---|",
            *later,
        ]
    commits = sorted({start["commit"], *(row["commit"] for row in rows.values())})
    lines += [
        "",
        f"SFT start on validation: Success {start['metrics']['success']:.3f} on {start['tasks']} tasks "
        f"({start['seconds'] / 60:.1f} min). Evaluations ran at commits " + ", ".join(f"`{c}`" for c in commits) + ".",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], help="<setting>/<run>=<saved policy folder>")
    parser.add_argument("--params", type=Path, default=EXPERIMENT / "main" / "params.yaml")
    parser.add_argument("--val-tasks", type=int, default=300)
    parser.add_argument("--report", action="store_true", help="Rebuild the report from the committed results.")
    args = parser.parse_args()
    for spec in args.model:
        name, sep, folder = spec.partition("=")
        if not sep:
            raise SystemExit(f"--model takes <setting>/<run>=<folder>, got {spec!r}")
        result_path(name)
        evaluate(name, Path(folder), args.params, args.val_tasks)
    if args.report or args.model:
        REPORT.write_text(report(), encoding="utf-8")
        print(f"wrote {REPORT.relative_to(ROOT)}")
    if not args.model and not args.report:
        parser.print_help()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
