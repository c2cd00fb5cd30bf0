"""Credit diagnostics on a hand-built batch, and segment gradient statistics on a tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from slca.credit import (
    compute_advantages,
    credit_diagnostics,
    segment_gradient_stats,
    segment_masks,
)
from slca.credit.diagnostics import pearson

R_TOOL = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.5, 0.5])
R_SUM = torch.tensor([0.0, 2.0, 0.5, 0.0, 0.1, 0.3])
GROUPS = torch.tensor([10, 10, 20, 20, 30, 30])
HALF = 1 / math.sqrt(2)


def _batch():
    tool, summary = segment_masks(torch.tensor([[1, 1, 0, 1]] * 6))
    grpo = compute_advantages("grpo", R_TOOL, R_SUM, tool, summary, GROUPS)
    slca = compute_advantages("slca", R_TOOL, R_SUM, tool, summary, GROUPS)
    return tool, summary, grpo, slca


def test_credit_diagnostics_values():
    tool, summary, grpo, slca = _batch()
    m = credit_diagnostics(slca, grpo, None, R_TOOL, R_SUM, tool, summary, GROUPS)
    # group 10: GRPO and execution advantages disagree in sign; group 20 agrees; group 30 has no tool signal
    assert m["misattribution_rate"] == pytest.approx(4 / 12)
    assert m["contamination"] == pytest.approx((4 * 2 * HALF + 4 * HALF) / 12, abs=1e-4)
    assert m["adv_tool_mean"] == pytest.approx(0.0, abs=1e-6)
    assert m["adv_tool_absmean"] == pytest.approx(8 * HALF / 12, abs=1e-4)
    assert m["adv_summary_absmean"] == pytest.approx(HALF, abs=1e-4)
    assert m["corr_r_tool_r_sum"] == pytest.approx(float(torch.corrcoef(torch.stack([R_TOOL, R_SUM]))[0, 1]), abs=1e-6)
    assert m["zero_var_tool_frac"] == pytest.approx(1 / 3)
    assert m["zero_var_summary_frac"] == 0.0
    assert m["zero_var_any_frac"] == pytest.approx(1 / 3)
    unit = compute_advantages("slca", R_TOOL, R_SUM, tool, summary, GROUPS)
    explicit = torch.where(tool, unit, torch.zeros_like(unit))
    assert credit_diagnostics(slca, grpo, explicit, R_TOOL, R_SUM, tool, summary, GROUPS) == m


def test_slca_has_no_misattribution_against_itself_and_empty_segments_are_zero():
    tool, summary, _, slca = _batch()
    m = credit_diagnostics(slca, slca, None, R_TOOL, R_SUM, tool, summary, GROUPS)
    assert m["misattribution_rate"] == 0.0 and m["contamination"] == pytest.approx(0.0, abs=1e-6)
    only_summary = segment_masks(torch.tensor([[1, 1, 1]] * 2))
    adv = compute_advantages("slca", [0.0, 1.0], [0.0, 1.0], *only_summary, [0, 0])
    m = credit_diagnostics(
        adv,
        adv,
        None,
        torch.tensor([0.0, 1.0]),
        torch.tensor([0.0, 1.0]),
        *only_summary,
        torch.tensor([0, 0]),
    )
    assert m["adv_tool_mean"] == 0.0 and m["misattribution_rate"] == 0.0
    assert m["zero_var_tool_frac"] == 1.0 and m["corr_r_tool_r_sum"] == pytest.approx(1.0)


def test_pearson_undefined_is_zero():
    assert pearson(torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.0, 1.0, 2.0])) == 0.0
    assert pearson(torch.tensor([1.0]), torch.tensor([2.0])) == 0.0


def _tiny_model_and_losses():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(11, 8), torch.nn.Linear(8, 11))
    tokens = torch.randint(0, 11, (3, 6))
    tool, summary = segment_masks(torch.tensor([[1, 1, 0, 1, 1, 0], [1, 0, 0, 1, 1, 1], [1, 1, 1, 1, 0, 0]]))

    def masked_loss(mask: torch.Tensor) -> torch.Tensor:
        logits = model(tokens[:, :-1])
        nll = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), tokens[:, 1:].reshape(-1), reduction="none")
        weight = mask[:, 1:].reshape(-1).float()
        return (nll * weight).sum() / weight.sum().clamp(min=1)

    return model, masked_loss, tool, summary


def test_segment_gradient_stats_matches_manual_backward_and_keeps_grads():
    model, masked_loss, tool, summary = _tiny_model_and_losses()
    stats = segment_gradient_stats(model, lambda: masked_loss(tool), lambda: masked_loss(summary))
    assert all(p.grad is None for p in model.parameters())
    grads = []
    for mask in (tool, summary):
        model.zero_grad()
        masked_loss(mask).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).double())
    assert stats["norm_tool"] == pytest.approx(float(grads[0].norm()), rel=1e-5)
    assert stats["norm_summary"] == pytest.approx(float(grads[1].norm()), rel=1e-5)
    assert stats["cos"] == pytest.approx(
        float(torch.nn.functional.cosine_similarity(grads[0], grads[1], dim=0)), abs=1e-5
    )
    assert -1.0 <= stats["cos"] <= 1.0


def test_segment_gradient_stats_extremes():
    model, masked_loss, tool, _ = _tiny_model_and_losses()
    same = segment_gradient_stats(model, lambda: masked_loss(tool), lambda: masked_loss(tool))
    assert same["cos"] == pytest.approx(1.0, abs=1e-6)
    opposite = segment_gradient_stats(model, lambda: masked_loss(tool), lambda: -masked_loss(tool))
    assert opposite["cos"] == pytest.approx(-1.0, abs=1e-6)
    nothing = segment_gradient_stats(model, lambda: masked_loss(tool), lambda: masked_loss(torch.zeros_like(tool)))
    assert nothing["norm_summary"] == 0.0 and nothing["cos"] == 0.0


def test_segment_normalisation_bias_on_a_no_call_task_and_a_cut_summary():
    """Group 0 (no_call): rollout 0 calls wrongly (R_tool 0), 1-3 abstain (R_tool 1, no tool segment).
    Paper rule: the lone caller's Â_tool is 0; over all members it is (0 − 0.75)/0.5 = −1.5, so the
    paper's rule gives it a hidden bonus of +1.5. Group 1 (multi_step): rollouts 4-5 have both
    segments, 6-7 were cut before a summary (R_sum 0): over the two summaries (0.9, 0.5) Â_sum is
    ±0.7071; over all four (0.9, 0.5, 0, 0) it is (0.55, 0.2)/0.4435 — the cut rows make the
    summaries look better than they are, so the paper's rule lowers them (bias −0.53, +0.26)."""
    from slca.credit import bias_by_kind, segment_normalisation_bias

    tool = torch.tensor(
        [
            [1, 1, 0, 0],
            [0, 0, 0, 0],
            [0, 0, 0, 0],
            [0, 0, 0, 0],
            [1, 0, 0, 0],
            [1, 0, 0, 0],
            [1, 1, 1, 1],
            [1, 1, 1, 1],
        ],
        dtype=torch.bool,
    )
    summary = torch.tensor(
        [
            [0, 0, 1, 1],
            [1, 1, 0, 0],
            [1, 1, 0, 0],
            [1, 1, 0, 0],
            [0, 1, 1, 0],
            [0, 1, 1, 0],
            [0, 0, 0, 0],
            [0, 0, 0, 0],
        ],
        dtype=torch.bool,
    )
    r_tool = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    r_sum = [0.5, 0.5, 0.5, 0.5, 0.9, 0.5, 0.0, 0.0]
    bias = segment_normalisation_bias(r_tool, r_sum, tool, summary, [0, 0, 0, 0, 1, 1, 1, 1])
    assert bias["tool"][0].item() == pytest.approx(1.5, abs=1e-5)
    assert torch.isnan(bias["tool"][1:4]).all()  # abstainers have no tool tokens to bias
    assert bias["tool"][4:].abs().max().item() < 1e-9  # every member of group 1 has a tool segment
    std = math.sqrt(((0.9 - 0.35) ** 2 + (0.5 - 0.35) ** 2 + 2 * 0.35**2) / 3)
    assert bias["summary"][4].item() == pytest.approx(1 / math.sqrt(2) - 0.55 / std, abs=1e-5)
    assert bias["summary"][5].item() == pytest.approx(-1 / math.sqrt(2) - 0.15 / std, abs=1e-5)
    assert torch.isnan(bias["summary"][6:]).all()
    kinds = ["no_call"] * 4 + ["multi_step"] * 4
    metrics = bias_by_kind(bias, kinds)
    assert metrics["segbias/tool_mean.no_call"] == pytest.approx(1.5, abs=1e-5)
    assert metrics["segbias/tool_mean.multi_step"] == pytest.approx(0.0, abs=1e-9)
    assert metrics["segbias/summary_abs.multi_step"] == pytest.approx(
        (abs(bias["summary"][4].item()) + abs(bias["summary"][5].item())) / 2
    )
    assert "segbias/tool_mean.single" not in metrics
