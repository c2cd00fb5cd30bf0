"""Advantage estimators behind one registry, chosen by name (DESIGN §1 step 3 and baselines).

Each estimator is a pure torch function of the per-rollout rewards, the segment masks and the
group ids; it returns a [B, T] tensor that is 0 on every token outside the tool and summary
segments (prompt, environment, padding). Group statistics use `index_add_` over dense group
indices, so there is no Python loop over rows, groups or tokens.

- `grpo`:  Â = norm_group(R_tool + R_sum) over all members, broadcast to every learned token.
- `slca`:  Â_tool = norm over members that have a tool segment, Â_sum over members that have a
           summary segment; A = λ_tool·Â_tool on tool tokens + λ_sum·Â_sum on summary tokens.
           Opt-in (`abstain_in_tool_baseline`, not the paper's rule): Â_tool is normalised over
           every member, abstainers included, so on a no-call task a wrong call's tool tokens
           are pushed below the correct abstainers (the paper's rule gives them exactly 0).
- `gdpo`:  as in GDPO (arXiv 2601.05242): each reward normalised within its group over all
           members, A = λ_tool·norm(R_tool) + λ_sum·norm(R_sum), then normalised once more over
           the batch, (A − mean_B A)/(std_B A + 1e-6); one advantage per rollout on every learned
           token. The control that separates segment locking from separate normalisation: SLCA
           normalises the same way but routes each advantage only to its own segment.
- `toolpo`: as in ToolPO's code, the tool advantage comes from the correct-call ratio
           (`extra["call_accuracy"]` = Σ C(a_call)/|gold|), not from R_tool:
           tool tokens A_global + λ_tool·norm(call_accuracy); summary tokens A_global.
- `rltr`:  as in RLTR, only the planner (tool segment) is trained, on its own reward
           (`extra["rltr_reward"]` = R_comp + R_repeat + R_error, −1 for an invalid format):
           tool tokens norm(rltr_reward); summary tokens 0.

The λ weights scale SLCA's two segments, GDPO's two rewards and ToolPO's A_tool only; GRPO, ToolPO's A_global and
RLTR are unweighted (their papers have no such weights).

norm over a set of members: (R − μ) / (σ + 1e-6), σ unbiased; (R − μ) when `scale_std` is off;
0 for members outside the set and for every member when the set has fewer than 2 rollouts.
Statistics are computed in float64 (near-tied totals would otherwise turn float32 rounding
into ±0.7 advantages through the 1/(σ + 1e-6) factor); the result is float32.
Baseline reward inputs (`extra`) are per-rollout [B] values computed with the HierR rewards
(`slca.rewards.baselines`); an estimator that needs one that is missing fails with its name.

Penalty rows (`penalty`, bool [B]): the gold needed a call and none was made. Their R_tool is
set to 0 and their R_sum is overridden by the total (`penalty_value`, −0.5), as DESIGN §1 says.

Usage:
    adv = compute_advantages("slca", r_tool, r_sum, tool_mask, summary_mask, group_ids)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

EPS = 1e-6
TOKEN_DTYPE = torch.float32  # dtype of the returned [B, T] advantages

Estimator = Callable[["AdvantageInputs"], Tensor]
_ESTIMATORS: dict[str, Estimator] = {}


@dataclass(frozen=True)
class AdvantageInputs:
    """Validated, dense inputs shared by every estimator."""

    r_tool: Tensor  # [B] float64: group statistics of B values are cheap in double precision
    r_sum: Tensor  # [B] float64
    tool_mask: Tensor  # [B, T] bool
    summary_mask: Tensor  # [B, T] bool
    group_index: Tensor  # [B] long, dense 0..G-1
    n_groups: int
    scale_std: bool
    weights: tuple[float, float]
    extra: dict[str, Tensor] = field(default_factory=dict)  # baseline reward inputs, [B] float64
    abstain_in_tool_baseline: bool = False  # slca only: abstainers join the tool group statistics

    def needs(self, name: str, estimator: str) -> Tensor:
        """The extra reward input `name`; a one-line error when the caller did not pass it."""
        if name not in self.extra:
            raise ValueError(
                f"the {estimator!r} estimator needs extra[{name!r}] (per-rollout values from slca.rewards.baselines)"
            )
        return self.extra[name]


def register(name: str) -> Callable[[Estimator], Estimator]:
    """Decorator adding an estimator to the registry under `name`."""

    def add(fn: Estimator) -> Estimator:
        if name in _ESTIMATORS:
            raise ValueError(f"advantage estimator {name!r} is already registered")
        _ESTIMATORS[name] = fn
        return fn

    return add


def list_estimators() -> list[str]:
    """Names of all registered estimators, sorted."""
    return sorted(_ESTIMATORS)


def get_estimator(name: str) -> Estimator:
    """The estimator registered as `name`; a clear error listing the choices otherwise."""
    if name not in _ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {name!r}; choose one of {list_estimators()}")
    return _ESTIMATORS[name]


def group_normalise(values: Tensor, members: Tensor, group_index: Tensor, n_groups: int, scale_std: bool) -> Tensor:
    """Per-group (R − μ)/(σ + eps) over `members`; 0 outside them or when a group has < 2.

    values/members are [B] or [B, C] (C reward columns normalised independently in one pass).
    """
    weight = members.to(values.dtype)
    shape = (n_groups, *values.shape[1:])
    count = values.new_zeros(shape).index_add_(0, group_index, weight)
    total = values.new_zeros(shape).index_add_(0, group_index, values * weight)
    deviation = (values - (total / count.clamp(min=1.0))[group_index]) * weight
    if scale_std:
        squares = values.new_zeros(shape).index_add_(0, group_index, deviation * deviation)
        std = (squares / (count - 1.0).clamp(min=1.0)).sqrt()
        deviation = deviation / (std[group_index] + EPS)
    enough = count[group_index] >= 2
    return torch.where(enough, deviation, torch.zeros_like(deviation))


def rows_with_tokens(mask: Tensor) -> Tensor:
    """Bool [B]: the row has at least one token in the (bool) mask."""
    if mask.shape[-1] == 0:
        return mask.new_zeros(mask.shape[:-1])
    return mask.view(torch.uint8).amax(dim=-1).bool()  # ~20x faster than Tensor.any on CPU


def segment_tokens(a_tool: Tensor, a_sum: Tensor, tool_mask: Tensor, summary_mask: Tensor) -> Tensor:
    """Place per-row tool/summary advantages on their tokens; 0 elsewhere."""
    a_tool, a_sum = a_tool.to(TOKEN_DTYPE), a_sum.to(TOKEN_DTYPE)
    on_summary = torch.where(summary_mask, a_sum.unsqueeze(-1), a_sum.new_zeros(()))
    return torch.where(tool_mask, a_tool.unsqueeze(-1), on_summary)


def _global_advantage(x: AdvantageInputs) -> Tensor:
    everyone = torch.ones_like(x.r_tool, dtype=torch.bool)
    return group_normalise(x.r_tool + x.r_sum, everyone, x.group_index, x.n_groups, x.scale_std)


def _tool_members_norm(values: Tensor, x: AdvantageInputs) -> Tensor:
    has_tool = rows_with_tokens(x.tool_mask)
    return group_normalise(values, has_tool, x.group_index, x.n_groups, x.scale_std)


@register("grpo")
def grpo(x: AdvantageInputs) -> Tensor:
    """One trajectory advantage of R_tool + R_sum on every learned token (no λ weights)."""
    a = _global_advantage(x)
    return segment_tokens(a, a, x.tool_mask, x.summary_mask)


@register("slca")
def slca(x: AdvantageInputs) -> Tensor:
    """Segment-locked: each segment's tokens get only their own segment's advantage."""
    rewards = torch.stack([x.r_tool, x.r_sum], dim=-1)  # both segments in one pass of index_add_
    tool_members = (
        torch.ones_like(x.r_tool, dtype=torch.bool) if x.abstain_in_tool_baseline else rows_with_tokens(x.tool_mask)
    )
    members = torch.stack([tool_members, rows_with_tokens(x.summary_mask)], dim=-1)
    a = group_normalise(rewards, members, x.group_index, x.n_groups, x.scale_std)
    w_tool, w_sum = x.weights
    return segment_tokens(w_tool * a[:, 0], w_sum * a[:, 1], x.tool_mask, x.summary_mask)


BATCH_SPREAD_FLOOR = 1e-8  # a batch spread below this is float noise of the group stage, not signal


def batch_normalise(values: Tensor, scale_std: bool) -> Tensor:
    """(v − mean)/(std + eps) over the whole batch (σ unbiased; mean-only when `scale_std` is
    off); 0 everywhere when the batch has fewer than 2 rows or no spread above float noise
    (group-normalised ties leave ~1e-11 residue that 1/(σ + 1e-6) would blow up to ~1e-4)."""
    if values.numel() < 2:
        return torch.zeros_like(values)
    std = values.std()
    if float(std) <= BATCH_SPREAD_FLOOR:
        return torch.zeros_like(values)
    deviation = values - values.mean()
    return deviation / (std + EPS) if scale_std else deviation


@register("gdpo")
def gdpo(x: AdvantageInputs) -> Tensor:
    """Each reward normalised in its group, λ-weighted sum, batch-normalised: one advantage per
    rollout on every learned token (segments are not told apart)."""
    rewards = torch.stack([x.r_tool, x.r_sum], dim=-1)
    everyone = torch.ones_like(rewards, dtype=torch.bool)
    a = group_normalise(rewards, everyone, x.group_index, x.n_groups, x.scale_std)
    w_tool, w_sum = x.weights
    total = batch_normalise(w_tool * a[:, 0] + w_sum * a[:, 1], x.scale_std)
    return segment_tokens(total, total, x.tool_mask, x.summary_mask)


@register("toolpo")
def toolpo(x: AdvantageInputs) -> Tensor:
    """Tool tokens A_global + λ_tool·norm(call accuracy); summary tokens A_global."""
    a_global = _global_advantage(x)
    a_tool = _tool_members_norm(x.needs("call_accuracy", "toolpo"), x)
    return segment_tokens(a_global + x.weights[0] * a_tool, a_global, x.tool_mask, x.summary_mask)


@register("rltr")
def rltr(x: AdvantageInputs) -> Tensor:
    """Only the tool (planner) segment is trained, on the RLTR reward; summary tokens get 0."""
    a_tool = _tool_members_norm(x.needs("rltr_reward", "rltr"), x)
    return segment_tokens(a_tool, torch.zeros_like(a_tool), x.tool_mask, x.summary_mask)


def _as_rewards(values: Tensor | list[float], name: str, batch: int, device: torch.device) -> Tensor:
    tensor = torch.as_tensor(values, dtype=torch.float64, device=device)  # lists stay exact
    if tensor.shape != (batch,):
        raise ValueError(f"{name} must have shape ({batch},) to match the masks; got {tuple(tensor.shape)}")
    return tensor


def prepare_inputs(
    r_tool: Tensor | list[float],
    r_sum: Tensor | list[float],
    tool_mask: Tensor,
    summary_mask: Tensor,
    group_ids: Tensor | list[int],
    *,
    scale_std: bool = True,
    weights: tuple[float, float] = (1.0, 1.0),
    penalty: Tensor | list[bool] | None = None,
    penalty_value: float = -0.5,
    extra: dict[str, Tensor | list[float]] | None = None,
    abstain_in_tool_baseline: bool = False,
) -> AdvantageInputs:
    """Validate shapes, make masks bool and group ids dense, and apply the penalty override."""
    if tool_mask.dim() != 2 or tool_mask.shape != summary_mask.shape:
        raise ValueError(
            f"tool_mask and summary_mask must both be [B, T]; got {tuple(tool_mask.shape)} "
            f"and {tuple(summary_mask.shape)}"
        )
    batch, device = tool_mask.shape[0], tool_mask.device
    tool, summary = tool_mask.bool(), summary_mask.bool()
    if tool.numel() and bool((tool.view(torch.uint8) & summary.view(torch.uint8)).amax()):
        raise ValueError("tool_mask and summary_mask overlap; a token belongs to one segment")
    rt = _as_rewards(r_tool, "r_tool", batch, device)
    rs = _as_rewards(r_sum, "r_sum", batch, device)
    groups = torch.as_tensor(group_ids, device=device)
    if groups.shape != (batch,):
        raise ValueError(f"group_ids must have shape ({batch},); got {tuple(groups.shape)}")
    unique, group_index = torch.unique(groups, return_inverse=True)
    if penalty is not None:
        flagged = torch.as_tensor(penalty, device=device).bool()
        if flagged.shape != (batch,):
            raise ValueError(f"penalty must have shape ({batch},); got {tuple(flagged.shape)}")
        rt = torch.where(flagged, torch.zeros_like(rt), rt)
        rs = torch.where(flagged, torch.full_like(rs, penalty_value), rs)
    extras = {key: _as_rewards(value, f"extra[{key!r}]", batch, device) for key, value in (extra or {}).items()}
    return AdvantageInputs(
        rt,
        rs,
        tool,
        summary,
        group_index,
        int(unique.numel()),
        scale_std,
        (float(weights[0]), float(weights[1])),
        extras,
        abstain_in_tool_baseline,
    )


def compute_advantages(
    name: str,
    r_tool: Tensor | list[float],
    r_sum: Tensor | list[float],
    tool_mask: Tensor,
    summary_mask: Tensor,
    group_ids: Tensor | list[int],
    *,
    scale_std: bool = True,
    weights: tuple[float, float] = (1.0, 1.0),
    penalty: Tensor | list[bool] | None = None,
    penalty_value: float = -0.5,
    extra: dict[str, Tensor | list[float]] | None = None,
    abstain_in_tool_baseline: bool = False,
) -> Tensor:
    """[B, T] token advantages under estimator `name` (see the module docstring)."""
    estimator = get_estimator(name)
    inputs = prepare_inputs(
        r_tool,
        r_sum,
        tool_mask,
        summary_mask,
        group_ids,
        scale_std=scale_std,
        weights=weights,
        penalty=penalty,
        penalty_value=penalty_value,
        extra=extra,
        abstain_in_tool_baseline=abstain_in_tool_baseline,
    )
    return estimator(inputs)
