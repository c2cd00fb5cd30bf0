"""Advantage estimators: exact formulas against a loop reference, and their properties."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slca.credit import compute_advantages, list_estimators, register, segment_masks
from slca.credit.advantages import EPS

T = 12


def _reference_norm(values: list[float], members: list[bool], groups: list[int], scale: bool) -> list[float]:
    """Loop reference of the per-group segment normalisation (DESIGN §1 step 3)."""
    out = [0.0] * len(values)
    for g in set(groups):
        idx = [i for i, gg in enumerate(groups) if gg == g and members[i]]
        if len(idx) < 2:
            continue
        mu = sum(values[i] for i in idx) / len(idx)
        sd = math.sqrt(sum((values[i] - mu) ** 2 for i in idx) / (len(idx) - 1))
        for i in idx:
            out[i] = (values[i] - mu) / (sd + EPS) if scale else values[i] - mu
    return out


def _reference(name, r_tool, r_sum, tool, summary, groups, scale, weights, extra):
    has_tool = [bool(r.any()) for r in tool]
    has_sum = [bool(r.any()) for r in summary]
    everyone = [True] * len(r_tool)
    a_glob = _reference_norm([a + b for a, b in zip(r_tool, r_sum)], everyone, groups, scale)
    a_tool = _reference_norm(r_tool, has_tool, groups, scale)
    a_sum = _reference_norm(r_sum, has_sum, groups, scale)
    a_acc = _reference_norm(extra["call_accuracy"], has_tool, groups, scale)
    a_rltr = _reference_norm(extra["rltr_reward"], has_tool, groups, scale)
    wt, ws = weights
    a_tool_all = _reference_norm(r_tool, everyone, groups, scale)
    a_sum_all = _reference_norm(r_sum, everyone, groups, scale)
    mixed = [wt * t + ws * s for t, s in zip(a_tool_all, a_sum_all)]
    a_gdpo = [0.0] * len(mixed)
    if len(mixed) >= 2:
        mu = sum(mixed) / len(mixed)
        sd = math.sqrt(sum((m - mu) ** 2 for m in mixed) / (len(mixed) - 1))
        a_gdpo = [(m - mu) / (sd + EPS) if scale else m - mu for m in mixed]
    per_row = {
        "grpo": [(g, g) for g in a_glob],
        "slca": [(wt * t, ws * s) for t, s in zip(a_tool, a_sum)],
        "gdpo": [(g, g) for g in a_gdpo],
        "toolpo": [(g + wt * c, g) for g, c in zip(a_glob, a_acc)],
        "rltr": [(r, 0.0) for r in a_rltr],
    }[name]
    out = torch.zeros(tool.shape, dtype=torch.float64)
    for b, (at, asum) in enumerate(per_row):
        out[b][tool[b]] = at
        out[b][summary[b]] = asum
    return out


@st.composite
def batches(draw, all_have_tool: bool = False):
    n = draw(st.integers(1, 10))
    rows = []
    for _ in range(n):
        row = draw(st.lists(st.integers(0, 1), min_size=T, max_size=T))
        if all_have_tool:
            row[0], row[1], row[2] = 1, 0, 1  # at least two runs: a tool segment exists
        rows.append(row)
    mask = torch.tensor(rows)
    rewards = st.integers(-20, 20).map(lambda k: k / 20)  # a reward grid keeps float32 error far below atol
    r_tool = draw(st.lists(rewards, min_size=n, max_size=n))
    r_sum = draw(st.lists(rewards, min_size=n, max_size=n))
    groups = draw(st.lists(st.sampled_from([-3, 0, 7, 1000]), min_size=n, max_size=n))
    return mask, r_tool, r_sum, groups


def _extra(r_tool, r_sum):
    """Baseline reward inputs that differ from R_tool, so a wrong input shows."""
    return {
        "call_accuracy": [round(1.0 - abs(t), 2) for t in r_tool],
        "rltr_reward": [round(t - 0.5 * s, 2) for t, s in zip(r_tool, r_sum)],
    }


@settings(max_examples=60, deadline=None)
@given(
    batches(),
    st.sampled_from(["grpo", "gdpo", "slca", "toolpo", "rltr"]),
    st.booleans(),
    st.tuples(st.sampled_from([0.5, 1.0, 2.0]), st.sampled_from([0.0, 1.0, 3.0])),
)
def test_estimators_match_loop_reference(batch, name, scale, weights):
    mask, r_tool, r_sum, groups = batch
    tool, summary = segment_masks(mask)
    extra = _extra(r_tool, r_sum)
    got = compute_advantages(name, r_tool, r_sum, tool, summary, groups, scale_std=scale, weights=weights, extra=extra)
    want = _reference(name, r_tool, r_sum, tool, summary, groups, scale, weights, extra)
    assert got.shape == mask.shape and torch.isfinite(got).all()
    assert torch.allclose(got.double(), want, atol=2e-4, rtol=1e-4)
    assert (got[~mask.bool()] == 0).all()


@settings(max_examples=40, deadline=None)
@given(batches(all_have_tool=True), st.integers(-4, 4).map(lambda k: k / 4))
def test_constant_summary_reward_makes_slca_tool_equal_grpo(batch, constant):
    mask, r_tool, _, groups = batch
    tool, summary = segment_masks(mask)
    r_sum = [constant] * len(r_tool)
    slca = compute_advantages("slca", r_tool, r_sum, tool, summary, groups)
    grpo = compute_advantages("grpo", r_tool, r_sum, tool, summary, groups)
    assert torch.allclose(slca[tool], grpo[tool], atol=1e-3)


@settings(max_examples=40, deadline=None)
@given(batches(), st.floats(0.1, 4.0), st.floats(0.1, 4.0))
def test_weights_scale_each_segment_linearly(batch, w_tool, w_sum):
    mask, r_tool, r_sum, groups = batch
    tool, summary = segment_masks(mask)
    unit = compute_advantages("slca", r_tool, r_sum, tool, summary, groups)
    scaled = compute_advantages("slca", r_tool, r_sum, tool, summary, groups, weights=(w_tool, w_sum))
    assert torch.allclose(scaled[tool], w_tool * unit[tool], atol=1e-5)
    assert torch.allclose(scaled[summary], w_sum * unit[summary], atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    batches(),
    st.randoms(use_true_random=False),
    st.sampled_from(["grpo", "gdpo", "slca", "toolpo", "rltr"]),
)
def test_permuting_rows_and_renaming_groups_permutes_output(batch, rng, name):
    mask, r_tool, r_sum, groups = batch
    tool, summary = segment_masks(mask)
    order = list(range(len(r_tool)))
    rng.shuffle(order)
    rename = {g: 17 * g + 5 for g in set(groups)}
    extra = _extra(r_tool, r_sum)
    base = compute_advantages(name, r_tool, r_sum, tool, summary, groups, extra=extra)
    moved = compute_advantages(
        name,
        [r_tool[i] for i in order],
        [r_sum[i] for i in order],
        tool[order],
        summary[order],
        [rename[groups[i]] for i in order],
        extra={key: [values[i] for i in order] for key, values in extra.items()},
    )
    assert torch.allclose(moved, base[order], atol=1e-5)


def test_summary_only_rollouts_do_not_enter_tool_statistics():
    mask = torch.tensor([[1, 0, 1], [1, 0, 1], [1, 1, 1], [1, 0, 1]])  # row 2 is summary-only
    tool, summary = segment_masks(mask)
    r_tool, r_sum, groups = [1.0, 0.0, 0.5, 0.5], [0.2, 0.4, 0.6, 0.8], [1, 1, 1, 1]
    adv = compute_advantages("slca", r_tool, r_sum, tool, summary, groups)
    extreme = compute_advantages("slca", [1.0, 0.0, 99.0, 0.5], r_sum, tool, summary, groups)
    assert torch.equal(adv[tool], extreme[tool])
    assert adv[2].tolist() == pytest.approx([adv[2, 0].item()] * 3)  # all summary tokens
    assert adv[2, 0].item() != 0.0
    assert tool[2].sum() == 0


def test_zero_variance_and_singleton_groups_give_zero_not_nan():
    mask = torch.tensor([[1, 0, 1]] * 5)
    tool, summary = segment_masks(mask)
    for name in list_estimators():
        adv = compute_advantages(
            name,
            [0.3] * 5,
            [0.7] * 5,
            tool,
            summary,
            [1, 1, 1, 2, 3],
            extra={"call_accuracy": [0.5] * 5, "rltr_reward": [-0.25] * 5},
        )
        assert torch.isfinite(adv).all() and adv.abs().max() < 1e-6, name


def test_members_without_segment_and_lonely_segments_get_zero():
    mask = torch.tensor([[1, 0, 1], [1, 1, 1], [1, 1, 1]])  # only row 0 has a tool segment
    tool, summary = segment_masks(mask)
    adv = compute_advantages("slca", [1.0, 0.0, 0.0], [0.0, 1.0, 0.5], tool, summary, [4, 4, 4])
    assert adv[0, 0].item() == 0.0  # a single tool member: fewer than 2 → 0
    assert adv[:, 2].tolist() == pytest.approx([-1.0, 1.0, 0.0], abs=1e-4)


def test_mean_only_when_std_scaling_is_off():
    mask = torch.tensor([[1, 0, 1]] * 3)
    tool, summary = segment_masks(mask)
    adv = compute_advantages("slca", [1.0, 0.0, 0.5], [0.0, 0.0, 0.6], tool, summary, [0, 0, 0], scale_std=False)
    assert adv[:, 0].tolist() == pytest.approx([0.5, -0.5, 0.0])
    assert adv[:, 2].tolist() == pytest.approx([-0.2, -0.2, 0.4])


def test_penalty_rows_get_zero_tool_reward_and_total_as_summary_reward():
    mask = torch.tensor([[1, 1, 1], [1, 0, 1], [1, 0, 1]])
    tool, summary = segment_masks(mask)
    r_tool, r_sum = [-0.5, 1.0, 0.0], [0.9, 0.5, 0.5]  # row 0: penalty total passed as r_tool
    penalty = torch.tensor([True, False, False])
    got = compute_advantages("slca", r_tool, r_sum, tool, summary, [0, 0, 0], penalty=penalty)
    want = compute_advantages("slca", [0.0, 1.0, 0.0], [-0.5, 0.5, 0.5], tool, summary, [0, 0, 0])
    assert torch.equal(got, want)
    grpo = compute_advantages("grpo", r_tool, r_sum, tool, summary, [0, 0, 0], penalty=penalty)
    assert grpo[0, 0].item() < 0  # R = 0 + (−0.5) is the worst total in the group


def test_toolpo_and_rltr_against_hand_computed_values():
    """Three rollouts of one group, each with a tool and a summary segment.

    ToolPO: A_global from R = R_tool + R_sum = (1.0, 1.0, 1.0) → 0 for all; the tool advantage
    comes from the correct-call ratio (1, 0, 0.5): mean 0.5, unbiased std 0.5 → (1, −1, 0),
    scaled by λ_tool = 0.5 → (0.5, −0.5, 0); summary tokens get A_global = 0, unweighted.
    RLTR: reward (1.0, −1.0, 0.75) → mean 0.25, std sqrt((0.5625 + 1.5625 + 0.25)/2) = 1.0897…
    """
    mask = torch.tensor([[1, 0, 1], [1, 0, 1], [1, 0, 1]])
    tool, summary = segment_masks(mask)
    r_tool, r_sum = [1.0, 0.0, 0.5], [0.0, 1.0, 0.5]
    extra = {"call_accuracy": [1.0, 0.0, 0.5], "rltr_reward": [1.0, -1.0, 0.75]}
    toolpo = compute_advantages("toolpo", r_tool, r_sum, tool, summary, [0, 0, 0], weights=(0.5, 3.0), extra=extra)
    assert toolpo[:, 0].tolist() == pytest.approx([0.5, -0.5, 0.0], abs=1e-5)
    assert toolpo[:, 2].tolist() == pytest.approx([0.0, 0.0, 0.0], abs=1e-6)
    rltr = compute_advantages("rltr", r_tool, r_sum, tool, summary, [0, 0, 0], weights=(4.0, 4.0), extra=extra)
    std = math.sqrt((0.75**2 + 1.25**2 + 0.5**2) / 2)
    assert rltr[:, 0].tolist() == pytest.approx([0.75 / std, -1.25 / std, 0.5 / std], abs=1e-5)
    assert (rltr[:, 2] == 0).all() and (rltr[:, 1] == 0).all()
    grpo = compute_advantages("grpo", [1.0, 0.0, 0.0], [0.0, 0.0, 0.0], tool, summary, [0, 0, 0], weights=(5.0, 5.0))
    assert grpo[0, 0].item() == pytest.approx(2 / math.sqrt(3), abs=1e-5)  # λ does not scale GRPO


def test_gdpo_against_hand_computed_values():
    """Two groups of two rollouts, each with a tool and a summary segment; λ = (2, 1).

    Group 0: R_tool (1, 0) → (+0.7071, −0.7071) (mean 0.5, unbiased std 0.7071);
             R_sum (0.2, 0.2) → (0, 0) (no spread).
    Group 1: R_tool (0.5, 0.5) → (0, 0); R_sum (0.9, 0.1) → (+0.7071, −0.7071).
    Weighted sums: (1.4142, −1.4142, 0.7071, −0.7071); batch mean 0, unbiased std
    sqrt((2 + 2 + 0.5 + 0.5)/3) = 1.2910 → (1.0954, −1.0954, 0.5477, −0.5477) on every learned
    token of the row (tool and summary alike). GRPO on the same batch gives group 1 (±0.7071)
    the same size as group 0: GDPO keeps the reward weights' proportions.
    """
    mask = torch.tensor([[1, 0, 1]] * 4)
    tool, summary = segment_masks(mask)
    r_tool, r_sum = [1.0, 0.0, 0.5, 0.5], [0.2, 0.2, 0.9, 0.1]
    gdpo = compute_advantages("gdpo", r_tool, r_sum, tool, summary, [0, 0, 1, 1], weights=(2.0, 1.0))
    h = 1 / math.sqrt(2)
    std = math.sqrt((4 * h * h * 2 + h * h * 2) / 3)
    want = [2 * h / std, -2 * h / std, h / std, -h / std]
    assert gdpo[:, 0].tolist() == pytest.approx(want, abs=1e-5)
    assert torch.equal(gdpo[:, 0], gdpo[:, 2]) and (gdpo[:, 1] == 0).all()
    slca = compute_advantages("slca", r_tool, r_sum, tool, summary, [0, 0, 1, 1], weights=(2.0, 1.0))
    assert slca[:, 0].tolist() == pytest.approx([2 * h, -2 * h, 0.0, 0.0], abs=1e-5)
    assert slca[:, 2].tolist() == pytest.approx([0.0, 0.0, h, -h], abs=1e-5)
    off = compute_advantages("gdpo", r_tool, r_sum, tool, summary, [0, 0, 1, 1], scale_std=False)
    assert off[:, 0].tolist() == pytest.approx([0.5, -0.5, 0.4, -0.4], abs=1e-6)  # mean-only both stages


def test_gdpo_normalises_abstainers_with_the_callers():
    # a no-call task: rollout 0 calls wrongly (R_tool 0), 1-3 abstain (R_tool 1, no tool segment)
    tool_mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    summary_mask = torch.tensor([[0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    r_tool, r_sum = [0.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]
    gdpo = compute_advantages("gdpo", r_tool, r_sum, tool_mask, summary_mask, [0, 0, 0, 0])
    slca = compute_advantages("slca", r_tool, r_sum, tool_mask, summary_mask, [0, 0, 0, 0])
    assert gdpo[0, 0].item() < -1.0 and gdpo[1, 0].item() > 0  # the wrong call is pushed down
    assert slca[0, 0].item() == 0.0  # the paper's rule: a lone tool segment gets nothing


def test_baselines_name_the_missing_reward_input():
    tool, summary = segment_masks(torch.tensor([[1, 0, 1], [1, 0, 1]]))
    with pytest.raises(ValueError, match=r"toolpo.*call_accuracy"):
        compute_advantages("toolpo", [0.0, 1.0], [0.0, 1.0], tool, summary, [0, 0])
    with pytest.raises(ValueError, match=r"rltr.*rltr_reward"):
        compute_advantages("rltr", [0.0, 1.0], [0.0, 1.0], tool, summary, [0, 0])


def test_registry_errors_and_extension():
    mask = torch.tensor([[1, 0, 1]])
    tool, summary = segment_masks(mask)
    with pytest.raises(ValueError, match="unknown advantage estimator 'nope'"):
        compute_advantages("nope", [0.0], [0.0], tool, summary, [0])
    with pytest.raises(ValueError, match="already registered"):
        register("slca")(lambda x: x.tool_mask.float())
    register("test_constant_one")(lambda x: x.tool_mask.float() + x.summary_mask.float())
    assert "test_constant_one" in list_estimators()
    assert compute_advantages("test_constant_one", [0.0], [0.0], tool, summary, [0]).tolist() == [[1, 0, 1]]
    with pytest.raises(ValueError, match="r_sum must have shape"):
        compute_advantages("slca", [0.0], [0.0, 1.0], tool, summary, [0])


def test_abstainers_join_the_tool_baseline_only_when_asked():
    # a no-call task: rollout 0 calls (R_tool 0), rollouts 1-3 abstain correctly (no tool segment)
    tool_mask = torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    summary_mask = torch.tensor([[0, 0, 1, 1], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]], dtype=torch.bool)
    r_tool, r_sum, groups = [0.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5], [0, 0, 0, 0]
    paper = compute_advantages("slca", r_tool, r_sum, tool_mask, summary_mask, groups)
    assert torch.equal(paper[0, :2], torch.zeros(2))  # a lone tool segment: no baseline, no credit
    variant = compute_advantages("slca", r_tool, r_sum, tool_mask, summary_mask, groups, abstain_in_tool_baseline=True)
    expected = (0.0 - 0.75) / (0.5 + 1e-6)  # unbiased std of [0, 1, 1, 1] is 0.5
    assert torch.allclose(variant[0, :2], torch.full((2,), expected))
    assert torch.equal(variant[1:, :2], torch.zeros(3, 2))  # abstainers have no tool tokens to credit
    assert torch.equal(variant[:, 2:], paper[:, 2:]) and torch.equal(variant[1:], paper[1:])
