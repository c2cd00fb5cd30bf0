"""Copy probe: can the tiny policy learn to copy argument values when the context is short?

The SFT sweep (reports/sft_sweep.md) shows ArgMatch flattening near 0.1 whatever the tokenizer
split or step budget, with generations that write plausible values from the training pool instead
of the requested ones. This probe removes the long prompt: each example is only the user request
followed by the gold calls of the first step (no system text, no tool schemas; ~60 tokens), in
batches of 16, so a few minutes buy thousands of examples. Half of the examples get their copied
values replaced by random same-shape strings (`sft.copy_augment`'s rewrite), so memorising values
does not pay. Optional stages:

- `--induction N`: N steps first on a synthetic copy task (a random 20-token span, a separator,
  the span again; loss on the repeat), which trains generic induction ("copy what followed the
  earlier occurrence") into the model;
- `--mix W`: keep that synthetic loss (weight W) beside the task loss during the main steps.

Scored greedily on the first 60 validation tasks that need a call: exact first-step calls and the
share of gold argument values the generated calls carry.

    .venv/bin/python scripts/copy_probe.py                 # every configuration, one after another
    .venv/bin/python scripts/copy_probe.py --only plain    # one of them
    .venv/bin/python scripts/copy_probe.py --report        # rebuild reports/copy_probe.md

Needs data/train.jsonl and data/val.jsonl (`slca synthesize`); uses params.yaml's tiny-policy
shape and tokenizer. Results: reports/copy_probe/<name>.json (committed) and reports/copy_probe.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "reports" / "copy_probe"
BATCH, N_VAL, SPAN = 16, 60, 20
CONFIGS: dict[str, dict[str, Any]] = {
    "plain": {"steps": 600, "augment": 0.5, "induction": 0, "mix": 0.0},
    "induction-first": {"steps": 600, "augment": 0.5, "induction": 600, "mix": 0.0},
    "induction-mixed": {"steps": 600, "augment": 0.5, "induction": 400, "mix": 0.5},
}


def synthetic_batch(torch: Any, vocab: int) -> tuple[Any, Any]:
    """A random span, a separator, the span again; labels only on the repeat."""
    span = torch.randint(10, vocab, (BATCH, SPAN))
    ids = torch.cat([span, torch.full((BATCH, 1), 1), span], 1)
    labels = ids.clone()
    labels[:, : SPAN + 1] = -100
    return ids, labels


def run(name: str, steps: int, augment: float, induction: int, mix: float, threads: int) -> dict[str, Any]:
    import torch

    from slca.config import load_params
    from slca.rollout.chat import tool_calls_message
    from slca.rollout.loop import tool_blocks
    from slca.train.augment import copy_augmented
    from slca.train.policy import build_tiny_model, read_tasks, tokenizer_for_tasks
    from slca.train.sft import training_template

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    params = load_params(ROOT / "params.yaml")
    train = read_tasks(ROOT / params.data.out_dir / "train.jsonl")
    val = read_tasks(ROOT / params.data.out_dir / "val.jsonl")
    tokenizer = tokenizer_for_tasks(train, params)
    template = training_template(tokenizer)
    rng = random.Random(0)

    def short(task: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return [m for m in task["messages"] if m["role"] == "user"], task["gold_steps"][0]

    def example(task: dict[str, Any]) -> tuple[list[int], list[int]]:
        if rng.random() < augment:
            task = copy_augmented(task, rng)
        user, step = short(task)
        encoded = tokenizer.apply_chat_template(
            user + [tool_calls_message(step)],
            chat_template=template,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        return encoded["input_ids"], encoded["assistant_masks"]

    pool = [t for t in train if t.get("gold_steps")]
    model = build_tiny_model(params.policy.tiny, tokenizer, 0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    pad, vocab = tokenizer.pad_token_id or 0, len(tokenizer)

    def update(loss: Any, lr: float) -> None:
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()

    started = time.perf_counter()
    induction_loss = math.nan
    for step in range(induction):
        ids, labels = synthetic_batch(torch, vocab)
        out = model(input_ids=ids, labels=labels)
        induction_loss = float(out.loss.item())
        update(out.loss, 2e-3 * min(1, (step + 1) / 50))
    induction_minutes = (time.perf_counter() - started) / 60
    started = time.perf_counter()
    losses = []
    for step in range(steps):
        batch = [example(rng.choice(pool)) for _ in range(BATCH)]
        width = max(len(ids) for ids, _ in batch)
        ids = torch.full((BATCH, width), pad)
        labels = torch.full((BATCH, width), -100)
        attention = torch.zeros((BATCH, width), dtype=torch.long)
        for row, (tokens, mask) in enumerate(batch):
            ids[row, : len(tokens)] = torch.tensor(tokens)
            attention[row, : len(tokens)] = 1
            labels[row, : len(tokens)] = torch.tensor([t if m else -100 for t, m in zip(tokens, mask, strict=True)])
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        losses.append(float(loss.item()))
        if mix:
            syn_ids, syn_labels = synthetic_batch(torch, vocab)
            loss = loss + mix * model(input_ids=syn_ids, labels=syn_labels).loss
        update(loss, 2e-3 * min(1, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * step / steps)))
    train_minutes = (time.perf_counter() - started) / 60

    model.eval()
    exact = values_right = values = n = 0
    samples = []
    for task in [t for t in val if t.get("gold_steps")][:N_VAL]:
        user, step = short(task)
        prompt = tokenizer.apply_chat_template(user, tokenize=True, add_generation_prompt=True, return_dict=True)[
            "input_ids"
        ]
        with torch.no_grad():
            generated = model.generate(torch.tensor([prompt]), max_new_tokens=96, do_sample=False, pad_token_id=pad)
        text = tokenizer.decode(generated[0][len(prompt) :], skip_special_tokens=False)
        calls = []
        for body in tool_blocks(text):
            with contextlib.suppress(json.JSONDecodeError):
                calls.append(json.loads(body))
        gold = [{"name": c["name"], "arguments": c["arguments"]} for c in step]
        n += 1
        exact += int(
            sorted(json.dumps(c, sort_keys=True) for c in calls) == sorted(json.dumps(c, sort_keys=True) for c in gold)
        )
        for call in gold:
            for key, value in call["arguments"].items():
                values += 1
                values_right += int(
                    any(
                        isinstance(c, dict)
                        and isinstance(c.get("arguments"), dict)
                        and c["arguments"].get(key) == value
                        for c in calls
                    )
                )
        if len(samples) < 6:
            samples.append({"request": user[0]["content"], "generated": text[:240]})
    tail = losses[-max(1, len(losses) // 10) :]
    return {
        "name": name,
        "steps": steps,
        "augment": augment,
        "induction": induction,
        "mix": mix,
        "threads": threads,
        "induction_minutes": round(induction_minutes, 2),
        "induction_final_loss": round(induction_loss, 4),
        "train_minutes": round(train_minutes, 2),
        "final_loss": round(sum(tail) / len(tail), 4),
        "n": n,
        "exact_first_step": exact / n,
        "value_accuracy": values_right / values,
        "samples": samples,
    }


def report() -> None:
    results = [
        json.loads((RESULTS / f"{name}.json").read_text()) for name in CONFIGS if (RESULTS / f"{name}.json").exists()
    ]
    lines = [
        "# Copy probe",
        "",
        (
            "Short-context SFT (user request → first-step calls, batch 16, half the examples with random "
            "same-shape values) of the tiny policy, with and without a synthetic induction task first or "
            f"beside it; greedy on {N_VAL} validation tasks. Regenerate with "
            "`.venv/bin/python scripts/copy_probe.py` (see its docstring)."
        ),
        "",
        (
            "| config | induction steps (final loss, min) | synthetic loss weight during SFT | SFT steps | SFT min "
            "| final SFT loss | exact first step | argument values right |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        induction = (
            f"{r['induction']} ({r['induction_final_loss']:.3f}, {r['induction_minutes']:.1f})"
            if r["induction"]
            else "—"
        )
        lines.append(
            f"| {r['name']} | {induction} | {r['mix'] or '—'} | {r['steps']} | {r['train_minutes']:.1f} "
            f"| {r['final_loss']:.3f} | {r['exact_first_step']:.3f} | {r['value_accuracy']:.3f} |"
        )
    lines += ["", "Generations (first validation tasks):", ""]
    for r in results:
        lines += [f"- {r['name']}:"] + [
            f"  - `{s['request']}` → `{' '.join(s['generated'].split())}`" for s in r["samples"][:3]
        ]
    (ROOT / "reports" / "copy_probe.md").write_text("\n".join(lines) + "\n")
    print(f"{len(results)} configurations -> reports/copy_probe.md")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=list(CONFIGS), help="Configurations to run (default: all).")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2: one run on both cores).")
    parser.add_argument("--report", action="store_true", help="Only rebuild the report from saved results.")
    args = parser.parse_args()
    if not args.report:
        RESULTS.mkdir(parents=True, exist_ok=True)
        for name in args.only or list(CONFIGS):
            result = run(name, threads=args.threads, **CONFIGS[name])
            (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))
            print(json.dumps({k: v for k, v in result.items() if k != "samples"}))
    report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
