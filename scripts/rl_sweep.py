"""Run the RL sweep (src/slca/train/rl_sweep.py) and write reports/rl_sweep.md.

    .venv/bin/python scripts/rl_sweep.py --parallel 1          # every SmolLM2 configuration, one at a time
    .venv/bin/python scripts/rl_sweep.py --only lr1e-4 lr3e-4  # some of them
    .venv/bin/python scripts/rl_sweep.py --report              # rebuild the report from saved runs

Needs data/ (`slca synthesize`) and the SFT checkpoint models/sft (`slca sft`), both from
params.yaml. A regime is the policy the rows train: `smollm2` (the default policy, params.yaml as
committed) or `tiny` (the from-scratch model of the previous regime: its rows need params.yaml
switched with `slca profile tiny --write params.yaml` and its own `slca sft`). Each configuration
runs in its own process with its own MLflow SQLite store; runs land in models/rl_sweep/<regime>/<name>/,
results in reports/rl_sweep/<regime>/<name>.json (committed, so --report rebuilds the report anywhere;
the tiny regime's are in reports/rl_sweep/ itself), logs beside them (local). A configuration that
already has its result is skipped, so an interrupted sweep resumes. Chosen on validation only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from slca.train import START_CACHE_ENV

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "models" / "rl_sweep"
RESULTS = ROOT / "reports" / "rl_sweep"
COMMAND = ".venv/bin/python scripts/rl_sweep.py"
N_VAL = 100


@dataclass(frozen=True)
class Regime:
    title: str
    results: Path
    configs: dict[str, dict]
    notes: dict[str, str] = field(default_factory=dict)
    gguf: bool = True  # the policy is converted from a GGUF (params.policy.base_gguf set)
    superseded: tuple[str, ...] = ()  # rows run before a change to what a rollout sees: shown, never chosen
    unrecorded_precision: str = ""  # what the rows that predate the precision record ran in


# SmolLM2: params.yaml's RL (G 8, 1 prompt a step, T 1.0, 2 tool turns of up to 192 tokens, LoRA on the
# merged SFT start) for 50 steps, 400 rollouts a row (the experiment's per-run budget), in the precision
# every row ran in (bf16 autocast, bf16 generation), pinned: params.yaml's `auto` would train in fp32 on a
# CPU without bf16 instructions, and rows are compared with each other and with the experiment
SMOL = {"train.max_steps": 50, "policy.cpu_bf16": True, "policy.generation_dtype": "bfloat16"}
# fp32 pinned (training and generation): the same precision on every CPU, and on one without bf16 instructions
# (every machine of the last sessions) bf16 is emulated and an RL step ~1.6x slower (docs/policy.md). The
# experiment runs in it; these rows repeat the chosen setting in it and try the temperature from it
SMOL32 = {"train.max_steps": 50, "policy.cpu_bf16": False, "policy.generation_dtype": "float32"}
G4P2 = {"train.learning_rate": 1e-4, "train.num_generations": 4, "train.prompts_per_step": 2}
OLD_TURN = {"train.max_completion_length": 128}  # the first rows' budget, before it held every gold turn
TINY = {"train.max_steps": 188}  # 1,504 rollouts: 2 prompts × G 4 × 188 steps
REGIMES: dict[str, Regime] = {
    "smollm2": Regime(
        "SmolLM2-135M-Instruct (the default policy)",
        RESULTS / "smollm2",
        {
            "lr1e-4": {**SMOL, **OLD_TURN, "train.learning_rate": 1e-4},
            "lr3e-4": {**SMOL, **OLD_TURN, "train.learning_rate": 3e-4},
            "len192-lr1e-4": {**SMOL, "train.learning_rate": 1e-4, "train.max_completion_length": 192},
            "lr1e-5": SMOL,  # make run's learning rate
            "g4p2-lr1e-4": {
                **SMOL,
                "train.learning_rate": 1e-4,
                "train.num_generations": 4,
                "train.prompts_per_step": 2,
            },
            "t0.7-lr1e-4": {**SMOL, "train.learning_rate": 1e-4, "train.temperature": 0.7},
            "grpo-lr1e-4": {**SMOL, "train.learning_rate": 1e-4, "sweep.estimator": "grpo"},
            "g4p2-lr1e-4-fp32": {**SMOL32, **G4P2},
            "g4p2-t0.7-lr1e-4-fp32": {**SMOL32, **G4P2, "train.temperature": 0.7},
            "grpo-g4p2-lr1e-4-fp32": {**SMOL32, **G4P2, "sweep.estimator": "grpo"},  # the baseline at the choice
        },
        {
            "lr1e-4": (
                "its minutes ran with diagnostic generation probes (one thread, lowest priority) on the cores for "
                "about 15 of them, and include the step-0 evaluation (the first row from this SFT start). The "
                "gain is mostly the summary (R_sum +0.091) with tool quality flat; no-call accuracy 1.00 → 0.75."
            ),
            "lr3e-4": (
                "alone on the cores. Three times the step buys more summary reward (R_sum +0.177) and pays for it in "
                "the calls (ArgMatch -0.087, Process -0.043): Success gains less than at lr 1e-4."
            ),
            "len192-lr1e-4": (
                "lr1e-4 again after two changes to what a rollout sees, so its step 0 is another: turns of up to 192 "
                "tokens (128 cut 100 of the 3,300 gold call turns of the train split, parallel requests of four long "
                "calls) and executor error texts that name tools and parameters bare (quoted `'name'`, they were "
                "copied into the next call as `\"name',`). The rows above ran before both. 36.0 min alone, "
                "including the step-0 evaluation (the first row of this start under the new texts and budget)."
            ),
            "grpo-lr1e-4": (
                "the baseline at len192-lr1e-4's setting, alone on a fresh machine, so its 48.9 min include its own "
                "step-0 evaluation (the start's figures reproduced exactly). It gains as much on validation "
                "(Success +0.10 against SLCA's +0.09, one task apart), more of it summary (R_sum +0.095) and less "
                "tool (ArgMatch -0.033): the setting is not tuned to favour SLCA."
            ),
            "g4p2-lr1e-4": (
                "G 4 × 2 prompts a step, the same 400 rollouts. Its 71.2 min are NOT alone: unit tests and a type "
                "check (lowest priority) ran beside it for about 25 of them, and gdb called malloc_trim in it every "
                "2 min (the row before it was killed by the OOM killer; see docs/policy.md, Memory). Best on "
                "validation (Success +0.12, 3 tasks above len192-lr1e-4, within the noise of 100 tasks), so it is the "
                "experiment's setting (experiments/headline.yaml, run there in fp32)."
            ),
            "t0.7-lr1e-4": (
                "NOT RUN TO THE END: killed by the kernel's OOM killer twice, both times after step 33 (the second "
                "time alone on the cores, with freed pages given back before every batch: 23.9 GB anonymous "
                "memory at the kill). Not fragmentation: the update's activations grow with the batch's padded "
                "tokens (a plain forward + backward of SmolLM2 over 8 rows peaked 6.4 / 11.5 / 17.1 GB above its "
                "start at 500 / 1,000 / 1,500 tokens a row under bf16 autocast, 16.0 GB at 1,000 in fp32), and one "
                "long rollout pads its whole group to its length. The update's memory is now bounded "
                "(train.loss_pass_tokens, docs/policy.md): a third run, alone, was stopped by hand after 2 steps "
                "(85 and 144 s, emulated bf16; 4,912 and 7,048 padded tokens in 3 and 4 passes) because the "
                "session had no hour left for it. The temperature was then tried from the chosen setting instead, "
                "in fp32: g4p2-t0.7-lr1e-4-fp32."
            ),
            "g4p2-lr1e-4-fp32": (
                "g4p2-lr1e-4 again in fp32 (training and generation pinned: the experiment's precision), alone "
                "except a unit-test file at lowest priority for its first 3 min; its 48.8 min include its own step-0 "
                "evaluation (fp32 generation: not the bf16 rows' cached one, yet the same figures to the last "
                "digit). It gains half as much as the bf16 run (Success +0.06 against +0.12, 6 validation tasks, "
                "R_sum +0.065 against +0.110): the sampled rollouts differ from the first step, so this is the "
                "run-to-run spread of one setting at 100 validation tasks, not a precision effect that could be told "
                "apart from it."
            ),
            "g4p2-t0.7-lr1e-4-fp32": (
                "g4p2-lr1e-4-fp32 at temperature 0.7, 36.6 min (step 0 read from the cache its fp32 repeat left), "
                "alone but for a package install and a unit-test file at lowest priority for about 3 of them. "
                "Success +0.05 against +0.06 at T 1.0 in the same precision (one task apart), less summary gain"
                " (R_sum +0.048): sampling colder buys nothing here, so T 1.0 stays. All no-call tasks stay "
                "answered without a call at both temperatures."
            ),
            "grpo-g4p2-lr1e-4-fp32": (
                "the baseline at the chosen setting in the experiment's precision, 35.9 min (step 0 cached), alone "
                "but for about 2 min of unit tests and checks at lowest priority. It gains Success +0.09 against "
                "SLCA's +0.06 at the same setting (3 tasks), with R_sum +0.091 against +0.065 and ArgMatch -0.006 "
                "against -0.024: on validation GRPO is not behind, so the setting is not tuned to favour SLCA; the "
                "experiment's 3 seeds on 300 test tasks decide."
            ),
            "lr1e-5": (
                "not run: make run's learning rate, where 6 steps move no greedy output; the sessions' time went to "
                "the memory bound and the fp32 rows. The current rows vary no learning rate (lr1e-4 against lr3e-4 "
                "ran before the turn-budget change and are superseded)."
            ),
        },
        superseded=("lr1e-4", "lr3e-4"),
        unrecorded_precision=(
            "they ran in bf16 autocast with bf16 generation (the SFT start's step-0 figures in fp32 equal theirs "
            "to the last digit)"
        ),
    ),
    "tiny": Regime(
        "the from-scratch tiny policy (previous regime)",
        RESULTS,
        {
            "base": TINY,  # lr 2e-4, β 0, T 1.0, 2 tool turns
            "lr1e-3": {**TINY, "train.learning_rate": 1e-3},
            "g8": {"train.num_generations": 8, "train.max_steps": 94},  # bigger groups, same rollouts
            "p4-lr5e-4": {"train.prompts_per_step": 4, "train.max_steps": 94, "train.learning_rate": 5e-4},
            "t0.7": {**TINY, "train.temperature": 0.7},
            "grpo-base": {**TINY, "sweep.estimator": "grpo"},  # is the setting good for the baseline too?
        },
        {
            "base": (
                "minutes measured with two configurations side by side (one torch thread each) and a unit-test "
                "run sharing the two cores, so inflated; the later rows ran two at a time with nothing else."
            ),
            "lr1e-3": (
                "collapses: the reward falls to ~0 and the policy stops calling tools (Name-F1 0); same timing "
                "caveat as base."
            ),
            "p4-lr5e-4": (
                "chosen on validation Success (+0.06, 6 of 100 tasks); it trades Name-F1 (-0.108) and "
                "ArgMatch for the summary reward (+0.356), i.e. most of its reward gain is the summary."
            ),
            "grpo-base": (
                "the baseline at base's setting moves the same way (Success -0.01): the setting is not tuned to "
                "favour SLCA."
            ),
        },
        gguf=False,
    ),
}


def run_one(regime: str, name: str) -> int:
    reg = REGIMES[regime]
    out = OUT / regime / name
    env = {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1)),
        "TOKENIZERS_PARALLELISM": "false",
        "MLFLOW_TRACKING_URI": f"sqlite:///{out / 'mlflow.db'}",
        # every row starts from the same SFT checkpoint: its step-0 validation is evaluated once
        START_CACHE_ENV: os.environ.get(START_CACHE_ENV, str(ROOT / "models" / "val_start")),
    }
    out.mkdir(parents=True, exist_ok=True)
    reg.results.mkdir(parents=True, exist_ok=True)
    with (reg.results / f"{name}.log").open("w") as handle:
        return subprocess.call(
            [sys.executable, __file__, "--regime", regime, "--single", name],
            cwd=ROOT,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )


def single(regime: str, name: str) -> None:
    from slca.config import load_params
    from slca.train.rl_sweep import run_config

    reg = REGIMES[regime]
    result = run_config(load_params(ROOT / "params.yaml"), name, reg.configs[name], OUT / regime, N_VAL, reg.results)
    print(json.dumps({"name": name, "minutes": result["minutes"], **result["delta"]}))


def stale_rows(reg: Regime, names: list[str]) -> list[str]:
    """The saved rows whose SFT start (`sft_start`, a digest of models/sft) is not the current one."""
    from slca.train.val_curve import checkpoint_digest

    saved = {
        n: json.loads((reg.results / f"{n}.json").read_text()) for n in names if (reg.results / f"{n}.json").exists()
    }
    if not any("sft_start" in row for row in saved.values()):
        return []
    current = checkpoint_digest(ROOT / "models" / "sft")[:16]
    return sorted(n for n, row in saved.items() if row.get("sft_start", current) != current)


def report() -> None:
    from slca.train.rl_sweep import choose, markdown

    sections, chosen = [], {}
    for regime, reg in REGIMES.items():
        results = [
            json.loads((reg.results / f"{name}.json").read_text())
            for name in reg.configs
            if (reg.results / f"{name}.json").exists()
        ]
        best = choose([r for r in results if r["estimator"] == "slca" and r["name"] not in reg.superseded])
        chosen[regime] = best["name"] if best else None
        sections.append(
            markdown(
                results,
                COMMAND,
                reg.notes,
                chosen[regime],
                title=reg.title,
                superseded=reg.superseded,
                unrecorded_precision=reg.unrecorded_precision,
            )
        )
    (ROOT / "reports").mkdir(exist_ok=True)
    (ROOT / "reports" / "rl_sweep.md").write_text(markdown([], COMMAND, sections=sections))
    print("reports/rl_sweep.md; chosen: " + ", ".join(f"{k} {v}" for k, v in chosen.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regime", choices=list(REGIMES), default="smollm2", help="The policy the rows train.")
    parser.add_argument("--only", nargs="*", help="Configurations to run (default: all of the regime's).")
    parser.add_argument("--single", help=argparse.SUPPRESS)
    parser.add_argument("--report", action="store_true", help="Only rebuild the report from saved runs.")
    parser.add_argument("--rerun", action="store_true", help="Run configurations that already have a result.")
    parser.add_argument("--parallel", type=int, default=1, help="Configurations run at once (1 thread each if > 1).")
    args = parser.parse_args()
    reg = REGIMES[args.regime]
    if args.single:
        single(args.regime, args.single)
        return 0
    if not args.report:
        from slca.config import load_params

        names = args.only or list(reg.configs)
        unknown = sorted(set(names) - set(reg.configs))
        if unknown:
            parser.error(f"unknown {args.regime} configurations {unknown}; choose from {list(reg.configs)}")
        if bool(load_params(ROOT / "params.yaml").policy.base_gguf) != reg.gguf:
            parser.error(f"params.yaml is not the {args.regime} regime's policy (see the docstring)")
        if not (ROOT / "models" / "sft" / "model.safetensors").exists():
            parser.error("no SFT checkpoint at models/sft: run `slca synthesize && slca sft` first")
        todo = [n for n in names if args.rerun or not (reg.results / f"{n}.json").exists()]
        stale = stale_rows(reg, [n for n in reg.configs if n not in todo])
        if stale and todo:
            parser.error(
                f"{stale} trained from another SFT start than models/sft: a regime's rows share one start; "
                "rerun them with --rerun --only ... or delete their results"
            )
        print(f"{len(todo)} of {len(names)} configurations to run: {todo}", flush=True)
        if args.parallel > 1:
            os.environ["OMP_NUM_THREADS"] = "1"
        from slca.train.rl_sweep import exit_outcome

        with ThreadPoolExecutor(max(1, args.parallel)) as pool:
            futures = {pool.submit(run_one, args.regime, name): name for name in todo}
            for future in as_completed(futures):  # each row reported as it ends, not after the whole chain
                name, code = futures[future], future.result()
                where = reg.results.relative_to(ROOT) / f"{name}.log"
                print(f"{name}: {exit_outcome(code)}" + ("" if code == 0 else f", see {where}"), flush=True)
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
