"""SLCA-GRPO trainer: the (B, T) advantages TRL consumes, tool-response masking, multi-turn rollouts."""

from __future__ import annotations

import json
import socket

import pytest
import torch
from grpo_fixtures import (
    ScriptedTurns,
    make_policy,
    small_params,
    small_raw,
    synthetic_tasks,
)

from slca.config import Params
from slca.credit import compute_advantages, segment_masks
from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
from slca.train.policy import load_policy


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("grpo")
    tasks = synthetic_tasks(8)
    make_policy(root / "sft", tasks)
    return root, tasks


@pytest.fixture(scope="module")
def trainer(setup):
    root, tasks = setup
    return make_trainer(root, tasks, "slca", beta=0.05)


def make_trainer(root, tasks, estimator: str, params: Params | None = None, **train) -> SLCAGRPOTrainer:
    params = params or small_params(root, **train)
    model, tokenizer = load_policy(params.sft.out_dir, params)
    args = grpo_config(params, estimator, 0, str(root / f"out-{estimator}"), save=False)
    trainer = SLCAGRPOTrainer(
        model,
        params=params,
        estimator=estimator,
        args=args,
        train_dataset=task_dataset(tasks),
        processing_class=tokenizer,
    )
    trainer._generate_single_turn = ScriptedTurns(trainer)
    return trainer


def generation_batch(trainer: SLCAGRPOTrainer, tasks, n_prompts: int = 2) -> dict:
    """One generated and scored batch, exactly as TRL's _prepare_inputs builds it."""
    rows = [row for row in task_dataset(tasks[:n_prompts]) for _ in range(trainer.num_generations)]
    trainer.model.train()
    return trainer._generate_and_score_completions(rows)


@pytest.mark.parametrize("estimator", ["slca", "grpo", "gdpo", "toolpo", "rltr"])
def test_trl_advantages_equal_credit_core(setup, trainer, estimator):
    _, tasks = setup
    trainer.estimator = estimator  # the estimator is plain trainer state: one trainer serves all four
    batch = generation_batch(trainer, tasks)
    response_mask = batch["completion_mask"] * batch["tool_mask"]
    credit, tokenizer = trainer.last_credit, trainer.processing_class
    _, last_run = segment_masks(response_mask)
    ends_on_call = torch.tensor(
        [
            "<tool_call>" in tokenizer.decode(ids[run], skip_special_tokens=False)
            for ids, run in zip(batch["completion_ids"], last_run)
        ]
    )
    tool_mask, summary_mask = segment_masks(response_mask, last_run_has_tool_call=ends_on_call)
    group_ids = torch.arange(response_mask.size(0)) // trainer.num_generations
    expected = compute_advantages(
        estimator,
        credit["r_tool"],
        credit["r_sum"],
        tool_mask,
        summary_mask,
        group_ids,
        penalty=credit["penalty"],
        extra=credit["extra"],
    )
    assert credit["r_tool"].dtype == torch.float64  # rewards stay float64 into the group statistics
    assert batch["advantages"].shape == response_mask.shape
    assert batch["advantages"].dtype == torch.float32  # the loss's own dtype, as TRL's advantages
    torch.testing.assert_close(batch["advantages"], expected.float())
    assert bool(tool_mask.any()) and bool(summary_mask.any())  # both segments occur in the batch
    assert bool((batch["advantages"] != 0).any())
    assert float(batch["advantages"][response_mask == 0].abs().sum()) == 0.0


def test_segments_follow_the_tool_response_mask(setup, trainer):
    _, tasks = setup
    trainer.estimator = "slca"
    batch = generation_batch(trainer, tasks)
    tokenizer, credit = trainer.processing_class, trainer.last_credit
    env = (batch["tool_mask"] == 0) & (batch["completion_mask"] == 1)
    assert bool(env.any())
    for row in range(batch["completion_ids"].size(0)):
        env_text = tokenizer.decode(batch["completion_ids"][row][env[row]], skip_special_tokens=False)
        learned = credit["tool_mask"][row] | credit["summary_mask"][row]
        learned_text = tokenizer.decode(batch["completion_ids"][row][learned], skip_special_tokens=False)
        if env[row].any():
            assert "<tool_response>" in env_text and "<tool_response>" not in learned_text
            tool_text = tokenizer.decode(batch["completion_ids"][row][credit["tool_mask"][row]])
            assert "<tool_call>" in tokenizer.decode(
                batch["completion_ids"][row][credit["tool_mask"][row]], skip_special_tokens=False
            ), tool_text
    # a group holds rollouts with different R_tool, so SLCA gives tool tokens non-zero advantages
    assert float(batch["advantages"][credit["tool_mask"]].abs().sum()) > 0


@pytest.mark.parametrize("share_prompt", [False, True], ids=["full-forward", "shared-prompt"])
def test_tool_response_tokens_get_zero_gradient(setup, trainer, share_prompt, monkeypatch):
    _, tasks = setup
    trainer.estimator = "slca"
    monkeypatch.setattr(trainer, "share_prompt", share_prompt)
    monkeypatch.setattr(trainer, "loss_pass_tokens", None)  # one forward for the hook below to see
    batch = generation_batch(trainer, tasks)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which is not running here
    trainer.model.zero_grad()
    captured = {}

    def keep_final_states(module, inputs, output):
        output.retain_grad()
        captured["states"] = output

    # TRL scores tokens with a fused LM head, so the hook sits on the final norm. TRL's full forward
    # runs [prompt | completion]: the state at P + t - 1 feeds only the logits that predict completion
    # token t. The shared-prompt forward runs each prompt once, then (last, so kept here) the tail
    # [last prompt token | completion], whose state at t predicts completion token t.
    handle = trainer.model.model.norm.register_forward_hook(keep_final_states)
    try:
        loss = trainer.compute_loss(trainer.model, batch)
        loss.backward()
    finally:
        handle.remove()
    grad = captured["states"].grad
    prompt_len, completion_len = batch["prompt_ids"].size(1), batch["completion_ids"].size(1)
    assert grad.size(1) == (1 + completion_len if share_prompt else prompt_len + completion_len)
    start = 0 if share_prompt else prompt_len - 1
    per_token = grad[:, start : start + completion_len].abs().sum(-1)
    mask = batch["completion_mask"] * batch["tool_mask"]
    env = (batch["tool_mask"] == 0) & (batch["completion_mask"] == 1)
    assert bool(env.any())
    assert float(per_token[env].sum()) == 0.0
    assert float(per_token[mask.bool()].sum()) > 0.0
    assert trainer.beta > 0  # the KL term is part of the loss checked here


def test_no_reference_model_when_beta_is_zero(setup, trainer):
    root, tasks = setup
    free = make_trainer(root, tasks, "slca", beta=0.0)
    assert free.beta == 0.0 and free.ref_model is None  # no second copy of the policy, no reference forward
    batch = generation_batch(free, tasks)
    assert "ref_per_token_logps" not in batch or batch["ref_per_token_logps"] is None
    assert trainer.ref_model is not None  # beta > 0 keeps one (the fixture's 0.05)
    assert (
        Params().train.beta == 0.0
    )  # the default: at 0.001 beta*KL was 4e-5 against a loss of 0.1 (benchmarks/rl_throughput.py)


def test_grpo_config_follows_params(setup):
    root, _ = setup
    params = small_params(root, num_generations=3, prompts_per_step=2, beta=0.01, loss_type="bnpo")
    args = grpo_config(params, "toolpo", 5, str(root / "cfg"))
    assert (args.num_generations, args.per_device_train_batch_size, args.beta) == (3, 6, 0.01)
    assert (args.loss_type, args.seed, args.save_steps, args.save_total_limit) == ("bnpo", 5, 2, 2)
    assert args.use_cpu and not args.bf16 and not args.gradient_checkpointing and not args.use_vllm
    kept = grpo_config(small_params(root, keep_checkpoints=True), "slca", 0, str(root / "cfg"))
    assert kept.save_total_limit is None  # every step's checkpoint stays, to be evaluated along the run
    with pytest.raises(ValueError, match="unknown advantage estimator 'nope'"):
        grpo_config(params, "nope", 0, str(root / "cfg"))


def test_smoke_runs_on_cpu(capsys):
    from slca.train.smoke import main

    assert (
        main(
            [
                "--device",
                "cpu",
                "--steps",
                "1",
                "--estimators",
                "slca,grpo",
                "--generations",
                "2",
                "--prompts",
                "1",
                "--max-completion-length",
                "8",
                "--max-tool-turns",
                "1",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["device"] == "cpu" and report["vllm"] is False
    assert set(report["results"]) == {"slca", "grpo"}
    assert all(r["tokens_per_s"] > 0 and r["peak_gpu_mem_gib"] == 0.0 for r in report["results"].values())


def test_training_and_evaluation_paths_score_the_same_turns_identically(setup):
    """One engine: the same scripted turns give the same tokens, masks and scores in both paths."""
    from scripted_policy import ScriptedPolicy

    from slca.rollout import (
        HFTurnGenerator,
        build_judge,
        reward_fn,
        run_episodes,
        training_env,
    )
    from slca.train.grpo_rollout import run_multiturn

    root, tasks = setup
    trainer = make_trainer(root, tasks, "slca")
    params, tokenizer = trainer.slca_params, trainer.processing_class
    chosen = tasks[:4]
    policy = ScriptedPolicy(tokenizer, chosen)

    def scripted_single_turn(prompt_ids, images, fields, num_generations, **_):
        out = []
        for ids in prompt_ids:
            row = policy.generate(
                torch.tensor([ids]),
                torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=params.train.max_completion_length,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id,
            )
            out.append(row[0, len(ids) :].tolist())
        return out, None

    trainer._generate_single_turn = scripted_single_turn
    judge = build_judge(params)
    payload = run_multiturn(trainer, chosen, params, judge)
    episodes = run_episodes(
        HFTurnGenerator(policy, tokenizer),
        chosen,
        env_factory=training_env(params),
        max_turns=params.train.max_tool_turns,
        max_new_tokens=params.train.max_completion_length,
        reward_fn=reward_fn(params, judge),
    )
    assert payload["completion_ids"] == [e.completion_ids for e in episodes]
    assert payload["env_mask"] == [e.response_mask for e in episodes]
    assert payload["slca_scores"] == [e.scores for e in episodes]
    assert all(e.scores["r_tool"] == 1.0 for e in episodes)  # gold turns under grounded simulation
    assert any(0 in mask for mask in payload["env_mask"])


def test_judge_failure_rate_is_logged_every_step(setup, trainer):
    _, tasks = setup
    trainer.estimator = "slca"
    before = len(trainer._metrics["train"]["judge/failure_rate"])
    generation_batch(trainer, tasks)
    assert trainer._metrics["train"]["judge/failure_rate"][before:] == [0.0]  # the rule judge never fails
    assert "simulator/fallback_rate" not in trainer._metrics["train"]  # the schema backend has no fallback


def test_run_stops_when_the_llm_simulator_keeps_falling_back(setup):
    from slca.simulator.endpoint import FailureBudgetExceeded

    root, tasks = setup
    with socket.socket() as probe:  # a port nothing listens on: every simulator request falls back
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    raw = small_raw(root)
    raw["simulator"] = {
        "backend": "llm",
        "grounded": False,
        "calibrated_knobs": None,
        "cache_path": str(root / "sim_cache.sqlite"),
        "llm": {"base_url": f"http://127.0.0.1:{port}/v1", "timeout_s": 1.0, "retries": 0},
        "llm_fallback_budget": {"window": 2, "max_rate": 0.5},
    }
    trainer = make_trainer(root, tasks, "slca", params=Params.model_validate(raw))
    with pytest.raises(FailureBudgetExceeded, match=r"of the last 2 calls \(100% > simulator\.llm_fallback_budget"):
        generation_batch(trainer, tasks)
    assert trainer._metrics["train"]["simulator/fallback_rate"] == [1.0]


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo", "dr_grpo"])
def test_a_batch_split_into_loss_passes_gives_the_one_pass_loss_and_gradient(setup, trainer, loss_type, monkeypatch):
    """`train.loss_pass_tokens` under the batch's padded size: the loss runs in passes (a group split across
    two of them here), each back-propagated; the summed loss and every gradient equal the one-pass ones."""
    _, tasks = setup
    trainer.estimator = "slca"
    monkeypatch.setattr(trainer, "loss_type", loss_type)
    batch = generation_batch(trainer, tasks, n_prompts=2)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which is not running here
    rows, width = batch["completion_ids"].size(0), batch["prompt_ids"].size(1) + batch["completion_ids"].size(1)
    assert batch.get("ref_per_token_logps") is not None  # beta 0.05: the KL term's columns are cut too

    def run(budget):
        monkeypatch.setattr(trainer, "loss_pass_tokens", budget)
        trainer.model.zero_grad(set_to_none=True)
        trainer._metrics["train"].clear()
        loss = trainer.compute_loss(trainer.model, batch)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        return float(loss), grads, trainer._metrics["train"]["batch/loss_passes"]

    one_loss, one_grads, one_passes = run(None)
    budget = width * (trainer.num_generations - 1)  # under one group: its rows go in two passes
    split_loss, split_grads, passes = run(budget)
    assert one_passes == [] and passes[0] >= 3, passes  # no budget: nothing logged; 2 groups, each split
    assert rows * width > budget
    assert split_loss == pytest.approx(one_loss, rel=1e-5, abs=1e-7)
    assert split_grads.keys() == one_grads.keys() and one_grads
    for name, grad in one_grads.items():
        assert torch.allclose(split_grads[name], grad, atol=1e-6, rtol=1e-4), name
    assert any(float(g.abs().sum()) > 0 for g in one_grads.values())
    _, _, within = run(rows * width)  # the batch fits: one pass
    assert within == [1.0]
