"""The loss forward with each group's prompt run once equals TRL's full forward: log-probabilities,
entropies and every LoRA gradient, on left-padded prompts shared by some rows and not others."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
from trl import GRPOTrainer
from trl.trainer.utils import add_fused_lm_head

from slca.shared_prefix import prompt_groups, shared_prefix_logps

PAD = 0


def policy(kind: str):
    torch.manual_seed(0)
    shape = {
        "vocab_size": 97,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 256,
        "pad_token_id": PAD,
    }
    model = LlamaForCausalLM(LlamaConfig(**shape)) if kind == "llama" else Qwen2ForCausalLM(Qwen2Config(**shape))
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0))
    with torch.no_grad():  # LoRA B starts at 0; make the adapters matter so their gradients are compared
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.2)
    return model


def batch():
    """Three groups: prompts of 9, 6 (left-padded) and 9 tokens; rows 0-2 and 3-4 share theirs, row 5 is alone;
    completions of different lengths, right-padded."""
    gen = torch.Generator().manual_seed(1)
    prompts = [
        torch.randint(1, 97, (9,), generator=gen),
        torch.randint(1, 97, (6,), generator=gen),
        torch.randint(1, 97, (9,), generator=gen),
    ]
    owner, lengths = [0, 0, 0, 1, 1, 2], [7, 4, 7, 5, 2, 6]
    width, keep = 9, 7
    ids = torch.full((6, width + keep), PAD)
    mask = torch.zeros_like(ids)
    for row, (group, length) in enumerate(zip(owner, lengths, strict=True)):
        prompt = prompts[group]
        ids[row, width - len(prompt) : width], mask[row, width - len(prompt) : width] = prompt, 1
        ids[row, width : width + length] = torch.randint(1, 97, (length,), generator=gen)
        mask[row, width : width + length] = 1
    return ids, mask, keep


def trl_forward(model, ids, mask, keep):
    """TRL's own loss forward (GRPOTrainer's method, unchanged)."""
    host = SimpleNamespace(accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True))
    logps, entropies, _ = GRPOTrainer._get_per_token_logps_and_entropies(
        host, model, ids, mask, keep, compute_entropy=True
    )
    return logps, entropies


def grads(model, logps, mask, keep):
    weights = torch.linspace(-1, 1, logps.numel()).view_as(logps)
    ((logps * weights) * mask[:, -keep:]).sum().backward()
    out = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out


def test_rows_sharing_a_prompt_are_grouped_in_first_seen_order():
    ids, mask, keep = batch()
    firsts, rows = prompt_groups(ids, mask, ids.shape[1] - keep)
    assert firsts.tolist() == [0, 3, 5] and rows.tolist() == [0, 0, 0, 1, 1, 2]


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_shared_prompt_forward_equals_the_full_forward_with_its_gradients(kind):
    model = policy(kind)
    ids, mask, keep = batch()
    full_logps, full_entropy = trl_forward(model, ids, mask, keep)
    full_grads = grads(model, full_logps, mask, keep)
    shared = shared_prefix_logps(model, ids, mask, keep, compute_entropy=True)
    assert shared is not None
    logps, entropy = shared
    live = mask[:, -keep:].bool()
    assert torch.allclose(logps[live], full_logps[live], atol=1e-5)
    assert torch.allclose(entropy[live], full_entropy[live], atol=1e-5)
    shared_grads = grads(model, logps, mask, keep)
    assert shared_grads.keys() == full_grads.keys() and len(full_grads) > 0
    for name, grad in full_grads.items():
        assert grad.abs().sum() > 0, name
        assert torch.allclose(shared_grads[name], grad, atol=1e-5, rtol=1e-4), name


def test_nothing_shared_falls_back_to_the_full_forward():
    model = policy("llama")
    ids, mask, keep = batch()
    assert shared_prefix_logps(model, ids[[0, 3, 5]], mask[[0, 3, 5]], keep) is None
