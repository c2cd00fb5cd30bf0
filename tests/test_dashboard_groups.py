"""Units of `slca.dashboard_groups`: prompt groups of a sample, sign flips against GRPO, filters, HTML."""

from __future__ import annotations

import pytest
from dashboard_fixtures import ENV, SUMMARY, TOOL, rollout, sample

from slca import dashboard_data as data
from slca import dashboard_groups as groups


def test_samples_split_into_prompt_groups_by_the_trainers_group_id():
    found = groups.sample_groups(sample())
    assert [(g.group, g.prompt_id, g.kind, len(g.rollouts)) for g in found] == [
        (0, "weather-001", "single", 2),
        (1, "weather-002", "parallel", 2),
    ]
    assert found[0].flips == ({"tool": len(TOOL), "summary": 0}, {"tool": len(TOOL), "summary": 0})
    assert found[0].flip_total == {"tool": 2 * len(TOOL), "summary": 0} and found[0].has_flips
    assert found[1].flip_total == {"tool": 0, "summary": 0} and not found[1].has_flips
    assert found[0].label == "group 0 · weather-001 · single · 2 rollouts · flips tool 8 / summary 0"


def test_samples_without_group_ids_are_cut_into_runs_of_num_generations():
    rows = sample()["rollouts"]
    for row in rows:
        del row["group"], row["kind"]
    found = groups.sample_groups({"rollouts": rows}, num_generations=2)
    assert [(g.group, g.prompt_id, g.kind) for g in found] == [
        (0, "weather-001", "unknown"),
        (1, "weather-002", "unknown"),
    ]
    assert [len(g.rollouts) for g in groups.sample_groups({"rollouts": rows}, num_generations=4)] == [4]
    assert groups.sample_groups({"rollouts": []}) == []


def test_flipped_tokens_need_opposite_nonzero_signs_on_learned_tokens():
    row = rollout("p", tool_adv=0.8, sum_adv=0.0, grpo_adv=-0.5, r_tool=1.0, r_sum=0.0)
    row["advantages_grpo"][len(TOOL)] = 3.0  # an environment token: never counted
    flips = groups.flipped_tokens(row)
    assert flips == [True] * len(TOOL) + [False] * (len(ENV) + len(SUMMARY))  # a zero summary advantage is no flip
    assert groups.flip_counts(row) == {"tool": len(TOOL), "summary": 0}
    row["advantages"][-1] = 0.1
    assert groups.flip_counts(row) == {"tool": len(TOOL), "summary": 1}


def test_rewards_disagree_when_a_rollout_is_above_the_mean_on_one_reward_and_below_on_the_other():
    first, second, third, fourth = sample()["rollouts"]
    assert groups.rewards_disagree([first, second])  # (1.0, 0.1) vs (0.4, 0.9)
    assert not groups.rewards_disagree([third, fourth])  # better on both
    assert not groups.rewards_disagree([first])
    tied = dict(second, r_tool=1.0)  # equal R_tool: no side to disagree on
    assert not groups.rewards_disagree([first, tied])


def test_filters_by_kind_flips_and_reward_disagreement():
    found = groups.sample_groups(sample())
    assert groups.kinds_of(found) == ["parallel", "single"]
    assert [g.group for g in groups.filter_groups(found)] == [0, 1]
    assert [g.group for g in groups.filter_groups(found, kind="parallel")] == [1]
    assert [g.group for g in groups.filter_groups(found, only_flips=True)] == [0]
    assert [g.group for g in groups.filter_groups(found, only_disagreeing=True)] == [0]
    assert groups.filter_groups(found, kind="parallel", only_flips=True) == []
    assert groups.filter_groups(found, kind="no_call") == []


def test_one_colour_scale_for_the_whole_group_and_both_views():
    found = groups.sample_groups(sample())
    assert groups.group_scale(found[0]) == pytest.approx(1.2)  # rollout 0's summary under SLCA
    assert groups.group_scale(found[1]) == pytest.approx(0.7)  # GRPO's ±0.7
    assert groups.group_scale(found[1], ("advantages",)) == pytest.approx(0.6)


def test_group_html_outlines_flipped_tokens_and_shows_rewards():
    group = groups.sample_groups(sample())[0]
    page = groups.group_html(group, ("advantages",), 1.2, "slca")
    assert page.count('class="slca-rollout"') == 2 and "\n" not in page
    assert page.count("slca-tok slca-tool slca-flip") == 2 * len(TOOL)
    assert page.count("slca-tok slca-summary") == 2 * len(SUMMARY) and "slca-summary slca-flip" not in page
    assert page.count('data-view="estimator"') == 2 and 'data-view="grpo"' not in page
    assert f"background:{data.advantage_colour(0.8, 1.2)}" in page and data.FLIP_STYLE in page
    assert "R_tool 1.00 (fmt 1.00 · name 1.00 · key 1.00 · value 1.00 · parallel 1.00) · R_sum 0.10" in page
    assert "sign flips: tool 4, summary 0" in page
    grpo = groups.group_html(group, ("advantages_grpo",), 1.2, "slca")
    assert f"background:{data.advantage_colour(-0.5, 1.2)}" in grpo and 'data-view="grpo"' in grpo
    both = groups.group_html(group, ("advantages", "advantages_grpo"), 1.2, "slca")
    assert both.count('data-view="estimator"') == 2 and both.count('data-view="grpo"') == 2
    assert groups.flip_summary_html(group) == (
        '<div class="slca-flip-count" data-tool="8" data-summary="0"><b>tokens whose sign flips between the '
        "estimator and GRPO</b>: tool 8 · summary 0</div>"
    )


def test_group_frame_lists_rewards_components_means_and_flips():
    frame = groups.group_frame(groups.sample_groups(sample())[0])
    assert list(frame.index) == [0, 1]
    assert frame.loc[0, "r_tool"] == 1.0 and frame.loc[1, "r_sum"] == 0.9 and frame.loc[1, "value"] == 0.4
    assert frame.loc[0, "A tool (estimator)"] == pytest.approx(0.8)
    assert frame.loc[0, "A tool (grpo)"] == pytest.approx(-0.5)
    assert frame.loc[1, "A summary (estimator)"] == pytest.approx(0.9)
    assert frame.loc[0, "flips tool"] == len(TOOL) and frame.loc[0, "flips summary"] == 0
    assert groups.rewards_line({"r_tool": 0.5}) == "R_tool 0.50 · R_sum –"
