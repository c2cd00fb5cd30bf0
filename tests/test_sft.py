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
    return tokenizer.decode(
        [t for t, m in zip(example["input_ids"], example["assistant_masks"], strict=True) if m == value]
    )


def test_mask_covers_assistant_turns_only(tokenizer):
    example = sft_example(single_task(0), tokenizer, training_template(tokenizer))
    assert masked_text(tokenizer, example, 1) == (
        '\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call><|im_end|>\n'
        "\nIt is 14 C and clear in Lima.<|im_end|>\n"
    )
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


def test_a_committed_adapter_starts_the_warm_up_and_zero_steps_merge_it(tmp_path, mlflow_store, one_thread):
    """`slca sft-adapter` saves LoRA weights only, with what they were trained on; `sft.init_adapter` starts
    from them (0 further steps: the adapter merged as it is); an adapter of another base is refused."""
    from test_chat_format import TINY

    from slca.config import Params
    from slca.train.policy import build_tiny_model
    from slca.train.sft import ADAPTER_INFO, run_sft_adapter, start_from_adapter, train_sft

    tasks = tiny_tasks(8)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks))
    tokenizer = train_tokenizer(corpus_texts(tasks), 700, 0, tags=())
    tokenizer.chat_template = None
    build_tiny_model(TINY, tokenizer, 0).save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    raw = {
        "project": {"tracking_uri": mlflow_store},
        "data": {"out_dir": str(tmp_path / "data")},
        "policy": {
            "model_path": str(tmp_path / "base"),
            "chat_template": "slca_compact",
            "lora": {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0},
        },
        "sft": {"max_steps": 3, "n_examples": 4, "learning_rate": 1e-2, "threads": 1},
    }
    metrics = run_sft_adapter(Params.model_validate(raw), tmp_path / "adapter")
    assert metrics["sft_steps"] == 3
    saved = sorted(path.name for path in (tmp_path / "adapter").iterdir())
    assert saved == sorted(["adapter_config.json", "adapter_model.safetensors", ADAPTER_INFO])  # no base weights
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(tmp_path / "base")
    info = json.loads((tmp_path / "adapter" / ADAPTER_INFO).read_text())
    assert info["chat_template"] == "slca_compact" and info["sft"]["max_steps"] == 3 and "sft_seconds" not in info

    raw["sft"].update(max_steps=0, init_adapter=str(tmp_path / "adapter"))
    params = Params.model_validate(raw)
    peft, tokenizer, _ = start_from_adapter(params)
    merged, _, started = train_sft(params, tasks)
    assert started["sft_steps"] == 0 and started["init_adapter"]["metrics"]["sft_steps"] == 3
    ids = torch.tensor([tokenizer("What is the weather in Lima?", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        fresh = load_policy(None, Params.model_validate({**raw, "sft": {"max_steps": 1}}))[0](input_ids=ids).logits
        assert torch.allclose(merged(input_ids=ids).logits, peft(input_ids=ids).logits, atol=1e-6)
        assert not torch.allclose(merged(input_ids=ids).logits, fresh, atol=1e-3)  # the adapter is not a no-op
    # the SFT sweep's adapter row: the adapter evaluated as it is, shown with its own training record
    from slca.train.sweep import SFT_MINUTES, run_config

    (tmp_path / "data" / "val.jsonl").write_text("".join(json.dumps(task) + "\n" for task in tasks[:2]))
    row = run_config(params, "adapter", {SFT_MINUTES: 12.5}, tmp_path / "sweep", 2, tmp_path / "results")
    assert row["sft_minutes"] == 12.5 and row["overrides"] == {}
    assert row["sft"]["sft_steps"] == 3 and row["sft"]["sft_examples"] == 4 and row["val"]["n"] == 2
    assert json.loads((tmp_path / "results" / "adapter.json").read_text())["sft"]["sft_steps"] == 3
    with pytest.raises(ValueError, match=r"an adapter row needs sweep\.sft_minutes"):
        run_config(params, "adapter", {}, tmp_path / "sweep", 2, tmp_path / "results")

    raw["policy"]["chat_template"] = "qwen2_5"
    with pytest.raises(ValueError, match=r"was trained on .* with template 'slca_compact'"):
        train_sft(Params.model_validate(raw), tasks)


def test_kind_shares_fix_each_named_kind_and_draw_the_rest_naturally():
    """sft.kind_shares {no_call: 0.25} gives exactly a quarter no-call examples (the split has 10 %), the rest
    from the other kinds; seeded; asking more than the split holds, or an unknown kind, is refused in one line."""
    from collections import Counter

    from slca.config import ParamsError, parse_params
    from slca.train.policy import select_by_kind, select_tasks

    tasks = [{"id": f"t{i}", "kind": "no_call" if i % 10 == 0 else ("single", "multiple")[i % 2]} for i in range(400)]
    chosen = select_by_kind(tasks, 80, 3, {"no_call": 0.25})
    kinds = Counter(task["kind"] for task in chosen)
    assert kinds["no_call"] == 20 and kinds["single"] + kinds["multiple"] == 60
    assert len({task["id"] for task in chosen}) == 80
    assert chosen == select_by_kind(tasks, 80, 3, {"no_call": 0.25})
    assert chosen != select_by_kind(tasks, 80, 4, {"no_call": 0.25})
    assert select_by_kind(tasks, 80, 3, None) == select_tasks(tasks, 80, 3)  # no shares: the draw as before
    with pytest.raises(ValueError, match=r"no_call 0\.9 of 80 is 72 examples, the train split has 40"):
        select_by_kind(tasks, 80, 3, {"no_call": 0.9})
    with pytest.raises(ParamsError, match="unknown task kind"):
        parse_params({"sft": {"kind_shares": {"nocall": 0.2}}})
    with pytest.raises(ParamsError, match="sum to at most 1"):
        parse_params({"sft": {"kind_shares": {"no_call": 0.7, "single": 0.6}}})
