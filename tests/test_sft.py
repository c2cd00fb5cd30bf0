"""SFT warm-up: assistant-only loss mask, loss goes down, atomic save that loads back."""

from __future__ import annotations

import json

import pytest
import torch
from policy_fixtures import no_call_task, single_task, small_params, tiny_tasks

from slca.train.policy import corpus_texts, load_policy, render_prompt, train_tokenizer
from slca.train.sft import build_sft_dataset, run_sft, sft_example, training_template


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(corpus_texts(tiny_tasks(24)), vocab_size=700, seed=0)


def masked_text(tokenizer, example, value):
    return tokenizer.decode([t for t, m in zip(example["input_ids"], example["assistant_masks"], strict=True)
                             if m == value])


def test_mask_covers_assistant_turns_only(tokenizer):
    example = sft_example(single_task(0), tokenizer, training_template(tokenizer))
    assert masked_text(tokenizer, example, 1) == (
        '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call><|im_end|>\n'
        "\nIt is 14 C and clear in Lima.<|im_end|>\n")
    unmasked = masked_text(tokenizer, example, 0)
    assert unmasked.startswith(render_prompt(single_task(0), tokenizer).removesuffix("\n"))
    assert '<tool_response>\n{"city": "Lima", "temp_c": 14, "sky": "clear"}\n</tool_response>' in unmasked
    assert "<tool_call>" not in unmasked.split("<|im_start|>user\nWhat is the weather")[1]


def test_no_call_task_trains_a_plain_refusal(tokenizer):
    example = sft_example(no_call_task(0), tokenizer, training_template(tokenizer))
    learned = masked_text(tokenizer, example, 1)
    assert "<tool_call>" not in learned and "None of the available tools can help" in learned


def test_too_long_examples_are_dropped_not_cut(tokenizer):
    tasks = tiny_tasks(8)
    lengths = [len(sft_example(t, tokenizer, training_template(tokenizer))["input_ids"]) for t in tasks]
    limit = sorted(lengths)[len(lengths) // 2]
    dataset, dropped = build_sft_dataset(tasks, tokenizer, limit)
    assert dropped == sum(length > limit for length in lengths) and len(dataset) + dropped == len(tasks)
    assert max(len(ids) for ids in dataset["input_ids"]) <= limit


@pytest.fixture
def one_thread():
    """One intra-op thread: on a shared 2-core machine oversubscribed OpenMP threads spin and crawl."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_run_sft_lowers_loss_and_saves_a_loadable_policy(tmp_path, mlflow_store, one_thread):
    params = small_params(tmp_path, max_steps=12, batch_size=4, learning_rate=5e-3)
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tiny_tasks(20)))
    metrics = run_sft(params)
    assert metrics["sft_steps"] == 12
    assert metrics["sft_final_loss"] < metrics["sft_first_loss"] - 1.0
    saved = tmp_path / "sft"
    assert json.loads((saved / "sft_metrics.json").read_text())["sft_steps"] == 12
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sft")]  # no staging dir left
    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_store)
    run = client.search_runs([client.get_experiment_by_name("slca").experiment_id])[0]
    assert run.data.tags["slca.stage"] == "sft"
    assert len(client.get_metric_history(run.info.run_id, "sft/loss")) == 12
    assert run.data.metrics["sft_final_loss"] == pytest.approx(metrics["sft_final_loss"])
    model, tokenizer = load_policy(saved, params)
    assert model.config.model_type == "qwen2" and tokenizer.eos_token == "<|im_end|>"
