"""Where the credit went: batch statistics comparing the active estimator with plain GRPO.

`credit_diagnostics` returns flat float metrics ready for MLflow:
- `adv_{tool,summary}_{mean,std,absmean}`: token statistics of the active advantages per segment;
- `misattribution_rate`: fraction of tool tokens whose GRPO advantage has the opposite sign of
  their execution advantage (the segment-locked tool advantage Â_tool); a value within 1e-6 of
  zero on either side is not counted as a disagreement;
- `contamination`: mean |A_grpo − Â_tool| over tool tokens (how much summary reward leaks in);
- `corr_r_tool_r_sum`: Pearson correlation of R_tool and R_sum in the batch (0 when undefined);
- `zero_var_{tool,summary}_frac`, `zero_var_any_frac`: fraction of groups in which a segment
  carries no signal (fewer than 2 members have it, or their rewards are all equal).

`segment_normalisation_bias` measures what the paper's rule (normalise a segment's reward only
over the group members that have the segment) does when the policy decides whether a segment
exists: per row, Â_seg under the paper's rule minus Â_seg normalised over every member, on the
rows that have the segment (NaN elsewhere). Positive = a hidden bonus: e.g. on a no-call task a
lone wrong call gets 0 instead of being pushed below the correct abstainers. GDPO and the opt-in
`abstain_in_tool_baseline` normalise over every member, so they carry no such bias.

`segment_gradient_stats` measures how the tool and summary losses pull on the parameters: the
cosine between their gradients and both norms, from two `torch.autograd.grad` passes that leave
the parameters' `.grad` untouched.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from slca.credit.advantages import (
    compute_advantages,
    group_normalise,
    prepare_inputs,
    rows_with_tokens,
)


def _token_stats(values: Tensor, mask: Tensor, prefix: str) -> dict[str, float]:
    picked = values[mask].double()
    if picked.numel() == 0:
        return {f"{prefix}_mean": 0.0, f"{prefix}_std": 0.0, f"{prefix}_absmean": 0.0}
    return {
        f"{prefix}_mean": float(picked.mean()),
        f"{prefix}_std": float(picked.std(unbiased=False)),
        f"{prefix}_absmean": float(picked.abs().mean()),
    }


def pearson(x: Tensor, y: Tensor) -> float:
    """Pearson correlation; 0.0 when fewer than 2 values or either side is constant."""
    x, y = x.double().flatten(), y.double().flatten()
    if x.numel() < 2:
        return 0.0
    dx, dy = x - x.mean(), y - y.mean()
    denominator = float(dx.norm() * dy.norm())
    return float((dx * dy).sum()) / denominator if denominator > 1e-12 else 0.0


def _silent_groups(values: Tensor, members: Tensor, group_index: Tensor, n_groups: int) -> Tensor:
    """Bool [G]: the segment has < 2 members in the group or their values are all equal."""
    weight = members.double()
    count = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, group_index, weight)
    big = torch.full((n_groups,), float("-inf"), dtype=torch.float64)
    small = torch.full((n_groups,), float("inf"), dtype=torch.float64)
    v = values.double()
    big = big.scatter_reduce(0, group_index[members], v[members], reduce="amax")
    small = small.scatter_reduce(0, group_index[members], v[members], reduce="amin")
    return (count < 2) | ((big - small) <= 1e-12)


def _opposite_signs(first: Tensor, second: Tensor, tolerance: float = 1e-6) -> Tensor:
    """Bool: both values are clearly non-zero and of opposite sign (float noise is not a sign)."""
    clear = (first.abs() > tolerance) & (second.abs() > tolerance)
    return clear & (first * second < 0)


def credit_diagnostics(
    adv_active: Tensor,
    adv_grpo: Tensor,
    adv_tool_only: Tensor | None,
    r_tool: Tensor,
    r_sum: Tensor,
    tool_mask: Tensor,
    summary_mask: Tensor,
    group_ids: Tensor,
    *,
    penalty: Tensor | None = None,
    scale_std: bool = True,
) -> dict[str, float]:
    """Flat metrics (see the module docstring). `adv_tool_only` is Â_tool = norm(R_tool) on tool
    tokens (SLCA's tool segment with unit weights); it is computed here when None."""
    x = prepare_inputs(r_tool, r_sum, tool_mask, summary_mask, group_ids, scale_std=scale_std, penalty=penalty)
    if adv_tool_only is None:
        slca_unit = compute_advantages(
            "slca",
            x.r_tool,
            x.r_sum,
            x.tool_mask,
            x.summary_mask,
            x.group_index,
            scale_std=scale_std,
        )
        adv_tool_only = torch.where(x.tool_mask, slca_unit, torch.zeros_like(slca_unit))
    tool, summary = x.tool_mask, x.summary_mask
    metrics = {
        **_token_stats(adv_active, tool, "adv_tool"),
        **_token_stats(adv_active, summary, "adv_summary"),
    }
    n_tool = int(tool.sum())
    grpo_on_tool, exec_on_tool = adv_grpo[tool].double(), adv_tool_only[tool].double()
    metrics["misattribution_rate"] = (
        float(_opposite_signs(grpo_on_tool, exec_on_tool).double().mean()) if n_tool else 0.0
    )
    metrics["contamination"] = float((grpo_on_tool - exec_on_tool).abs().mean()) if n_tool else 0.0
    metrics["corr_r_tool_r_sum"] = pearson(x.r_tool, x.r_sum)
    index, groups = x.group_index.cpu(), x.n_groups
    silent_tool = _silent_groups(x.r_tool.cpu(), rows_with_tokens(tool).cpu(), index, groups)
    silent_sum = _silent_groups(x.r_sum.cpu(), rows_with_tokens(summary).cpu(), index, groups)
    metrics["zero_var_tool_frac"] = float(silent_tool.double().mean())
    metrics["zero_var_summary_frac"] = float(silent_sum.double().mean())
    metrics["zero_var_any_frac"] = float((silent_tool | silent_sum).double().mean())
    return metrics


def segment_normalisation_bias(
    r_tool: Tensor,
    r_sum: Tensor,
    tool_mask: Tensor,
    summary_mask: Tensor,
    group_ids: Tensor,
    *,
    penalty: Tensor | None = None,
    scale_std: bool = True,
) -> dict[str, Tensor]:
    """{"tool", "summary"}: float64 [B], Â_seg(members with the segment) − Â_seg(all members) on
    rows that have the segment, NaN on rows that do not (unit λ weights)."""
    x = prepare_inputs(r_tool, r_sum, tool_mask, summary_mask, group_ids, scale_std=scale_std, penalty=penalty)
    rewards = torch.stack([x.r_tool, x.r_sum], dim=-1)
    has = torch.stack([rows_with_tokens(x.tool_mask), rows_with_tokens(x.summary_mask)], dim=-1)
    paper = group_normalise(rewards, has, x.group_index, x.n_groups, scale_std)
    everyone = group_normalise(rewards, torch.ones_like(has), x.group_index, x.n_groups, scale_std)
    bias = torch.where(has, paper - everyone, torch.full_like(paper, float("nan")))
    return {"tool": bias[:, 0], "summary": bias[:, 1]}


def bias_by_kind(bias: dict[str, Tensor], kinds: list[str]) -> dict[str, float]:
    """Flat metrics `segbias/{tool,summary}_{mean,abs}.<kind>` over the rows of each kind that have
    the segment (a kind with no such row is left out)."""
    metrics: dict[str, float] = {}
    for kind in sorted(set(kinds)):
        rows = torch.tensor([k == kind for k in kinds])
        for segment, values in bias.items():
            picked = values.cpu()[rows]
            picked = picked[~torch.isnan(picked)]
            if picked.numel():
                metrics[f"segbias/{segment}_mean.{kind}"] = float(picked.mean())
                metrics[f"segbias/{segment}_abs.{kind}"] = float(picked.abs().mean())
    return metrics


def _flat_grad(loss: Tensor, params: list[torch.nn.Parameter]) -> Tensor:
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat(
        [(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)]
    ).double()


def segment_gradient_stats(
    model: torch.nn.Module,
    loss_fn_tool: Callable[[], Tensor],
    loss_fn_summary: Callable[[], Tensor],
) -> dict[str, float]:
    """{cos, norm_tool, norm_summary} of the gradients of the tool- and summary-masked losses.

    Each loss function runs its own forward pass and returns a scalar; cos is 0 when either
    gradient vanishes.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("segment_gradient_stats: the model has no trainable parameters")
    g_tool, g_sum = _flat_grad(loss_fn_tool(), params), _flat_grad(loss_fn_summary(), params)
    n_tool, n_sum = float(g_tool.norm()), float(g_sum.norm())
    cos = float(g_tool @ g_sum) / (n_tool * n_sum) if n_tool > 0 and n_sum > 0 else 0.0
    return {"cos": cos, "norm_tool": n_tool, "norm_summary": n_sum}
