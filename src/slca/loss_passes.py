"""An RL step's loss batch split into passes under a token budget, each pass's gradient added to the step's.

The activations one forward/backward of the GRPO loss keeps grow with the batch's padded tokens (rows ×
(prompt + completion) width), and a batch is padded to its longest rollout: one rollout with long tool
responses sets the cost of every row. On a CPU without gradient checkpointing that is ~1.5–2 MB a token
for a 135M model, so an ordinary step of 8 rollouts at 1,500 tokens needs > 20 GB.

`plan_passes` splits the rows into passes of at most `budget` padded tokens each, keeping the rows that share
a prompt together where a whole group fits (so `slca.shared_prefix` still runs each prompt once per pass) and
splitting a group only when it alone exceeds the budget; `take_rows` cuts one pass out of TRL's input dict,
trimming the completion columns past the pass's longest completion (right padding: causal attention makes
the kept positions' log-probabilities independent of it). The loss of each pass is weighted so that the
passes' losses, and their gradients, sum to the one-pass loss's (`pass_weight`).

    for rows in plan_passes(prompt_ids, prompt_mask, completion_mask, budget):
        part = take_rows(inputs, rows)
        loss = trainer_loss(part) * pass_weight(loss_type, part, inputs)
"""

from __future__ import annotations

from typing import Any

import torch

from slca.shared_prefix import prompt_groups

#: TRL loss types whose normalisation `pass_weight` reproduces exactly across passes
SPLITTABLE_LOSSES = frozenset({"dapo", "cispo", "grpo", "sapo", "bnpo", "dr_grpo"})
#: keys of TRL's loss inputs cut on rows but not trimmed (the prompt's columns are the prompt's)
PROMPT_KEYS = frozenset({"prompt_ids", "prompt_mask"})


def completion_lengths(completion_mask: torch.Tensor) -> torch.Tensor:
    """(B,) one past the last unmasked completion position of each row (0 for an empty row)."""
    width = completion_mask.size(1)
    positions = torch.arange(1, width + 1, device=completion_mask.device).expand_as(completion_mask)
    return (positions * (completion_mask != 0)).amax(dim=1)


def plan_passes(
    prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_mask: torch.Tensor, budget: int
) -> list[torch.Tensor]:
    """Row indices of each pass: whole prompt groups packed while rows × (prompt width + longest completion)
    stays within `budget`; a group over the budget alone is split into runs of rows (at least one a pass)."""
    if budget < 1:
        raise ValueError(f"the loss pass budget must be a positive number of tokens, got {budget}")
    rows = prompt_ids.size(0)
    if rows == 0:
        return []
    prompt_width = prompt_ids.size(1)
    lengths = completion_lengths(completion_mask).tolist()
    if prompt_width == 0:
        labels = [0] * rows
    else:
        _, inverse = prompt_groups(prompt_ids, prompt_mask, prompt_width)
        labels = inverse.tolist()
    groups: dict[int, list[int]] = {}
    for row, label in enumerate(labels):
        groups.setdefault(label, []).append(row)

    def cost(members: list[int]) -> int:
        return len(members) * (prompt_width + max((lengths[r] for r in members), default=0))

    passes: list[list[int]] = []
    current: list[int] = []
    for members in groups.values():
        if current and cost(current + members) <= budget:
            current = current + members
            continue
        if current:
            passes.append(current)
            current = []
        if cost(members) <= budget:
            current = list(members)
            continue
        for row in members:  # a group over the budget: runs of its rows, each within it where one row is
            if current and cost([*current, row]) > budget:
                passes.append(current)
                current = []
            current.append(row)
    if current:
        passes.append(current)
    return [torch.tensor(p, dtype=torch.long) for p in passes]


def take_rows(inputs: dict[str, Any], rows: torch.Tensor) -> dict[str, Any]:
    """The rows `rows` of TRL's loss inputs, completion-aligned columns cut at the rows' longest completion.
    Scalars (`num_items_in_batch`) are shared by every pass."""
    completion_mask = inputs["completion_mask"]
    batch, width = completion_mask.shape
    index = rows.to(completion_mask.device)
    keep = max(1, int(completion_lengths(completion_mask[index]).max()))
    part: dict[str, Any] = {}
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.size(0) == batch:
            value = value[index.to(value.device)]
            if key not in PROMPT_KEYS and value.dim() == 2 and value.size(1) == width:
                value = value[:, :keep]
        part[key] = value
    return part


def pass_weight(loss_type: str, part: dict[str, Any], whole: dict[str, Any]) -> float:
    """The factor that makes a pass's loss its share of the one-pass loss: 1 for losses normalised by the
    whole batch's token count (dapo, cispo: TRL reads `num_items_in_batch`), the pass's share of rows for
    per-row means (grpo, sapo, dr_grpo), its share of scored tokens for bnpo's batch token mean."""
    if loss_type not in SPLITTABLE_LOSSES:
        raise ValueError(f"loss type {loss_type!r} cannot be split into passes; use one of {sorted(SPLITTABLE_LOSSES)}")
    if loss_type in ("dapo", "cispo"):
        return 1.0
    if loss_type in ("grpo", "sapo", "dr_grpo"):
        return part["completion_mask"].size(0) / whole["completion_mask"].size(0)

    def scored(inputs: dict[str, Any]) -> float:
        mask = inputs["completion_mask"]
        if inputs.get("tool_mask") is not None:
            mask = mask * inputs["tool_mask"]
        return float(mask.sum())

    total = scored(whole)
    return scored(part) / total if total > 0 else part["completion_mask"].size(0) / whole["completion_mask"].size(0)
