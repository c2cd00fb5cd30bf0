"""The loss forward of a GRPO step with each group's prompt computed once.

The G rollouts of a group share their prompt token for token (same ids, same left padding), and on a
tool-calling task the prompt (system prompt and tool schemas) is most of each sequence. TRL's loss runs
the whole `[prompt | completion]` of every row through the model, so a group's prompt is read G times,
forward and backward. Here each distinct prompt (all but its last token) runs once, its KV cache is
copied to the rows that share it (an index, so gradients from every row flow back into the one prompt
computation), and the rows then run `[last prompt token | completion]` on top of that cache through
TRL's fused LM head. Positions are those of the full forward (the cache length offsets them), so the
log-probabilities, entropies and gradients equal the full forward's up to floating-point order
(`tests/test_shared_prefix.py`); only the work changes: a step of P prompts × G rows reads
P·prompt + P·G·completion tokens instead of P·G·(prompt + completion).

    logps, entropies = shared_prefix_logps(model, input_ids, attention_mask, logits_to_keep,
                                           compute_entropy=True, autocast=accelerator.autocast)

`shared_prefix_logps` returns None when sharing cannot help or does not apply (no row shares its prompt,
a prompt of one token, a model without a backbone to run alone); the caller then runs the full forward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from slca.rollout.cached import CACHE_KWARG, output_cache


def prompt_groups(
    input_ids: torch.Tensor, attention_mask: torch.Tensor, prompt_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(first row of each distinct prompt, that prompt's index for every row): rows share a prompt when
    their first `prompt_len` ids and mask agree. Distinct prompts keep the order of their first row."""
    key = torch.cat([input_ids[:, :prompt_len], attention_mask[:, :prompt_len].to(input_ids.dtype)], dim=1)
    _, inverse = torch.unique(key, dim=0, return_inverse=True)
    firsts: list[int] = []
    slot: dict[int, int] = {}
    rows = []
    for row, label in enumerate(inverse.tolist()):
        if label not in slot:
            slot[label] = len(firsts)
            firsts.append(row)
        rows.append(slot[label])
    return torch.tensor(firsts, dtype=torch.long), torch.tensor(rows, dtype=torch.long)


def _backbone(model: Any) -> Any | None:
    """The decoder stack of a causal LM (PEFT's LoRA layers live inside it), or None."""
    plain = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(plain, getattr(plain, "base_model_prefix", ""), None)
    return backbone if isinstance(backbone, torch.nn.Module) and backbone is not plain else None


def shared_prefix_logps(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    compute_entropy: bool = False,
    autocast: Callable[[], Any] = contextlib.nullcontext,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """Per-token log-probabilities (and entropies) of the last `logits_to_keep` tokens of each row, as TRL's
    fused-head forward gives them, with each distinct prompt computed once; None when that does not apply."""
    prompt_len = input_ids.shape[1] - logits_to_keep
    if prompt_len < 2:
        return None
    firsts, rows = prompt_groups(input_ids, attention_mask, prompt_len)
    backbone = _backbone(model)
    if len(firsts) == len(rows) or backbone is None:
        return None
    head = prompt_len - 1  # the last prompt token runs with its row: its output scores the first completion token
    with autocast():
        out = backbone(input_ids=input_ids[firsts, :head], attention_mask=attention_mask[firsts, :head], use_cache=True)
    cache = output_cache(out)
    if cache is None:
        return None
    cache.batch_select_indices(rows)  # each row reads its prompt's cache; gradients sum back into it
    tail_ids = input_ids[:, head:]
    labels = tail_ids.masked_fill(attention_mask[:, head:] == 0, -100)
    labels[:, 0] = -100
    with autocast():
        scored = model(
            input_ids=tail_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True, **{CACHE_KWARG: cache}
        )
    logps = scored.log_probs[:, -logits_to_keep:]
    entropies = scored.entropy[:, -logits_to_keep:] if compute_entropy else None
    return logps, entropies
