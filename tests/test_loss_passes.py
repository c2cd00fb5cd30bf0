"""Planning an RL loss batch into passes under a token budget: whole prompt groups together, a group
over the budget split into runs of its rows, every row exactly once, each pass's columns cut at its own
longest completion, and each loss type's weights summing to the one-pass normalisation."""

from __future__ import annotations

import pytest
import torch

from slca.loss_passes import completion_lengths, pass_weight, plan_passes, take_rows

PAD = 0


def batch(lengths: list[int], owners: list[int], prompt_width: int = 4, width: int = 10) -> dict:
    """Rows whose prompt is chosen by `owners` (same owner, same prompt), completions right-padded."""
    rows = len(lengths)
    prompts = torch.arange(1, 1 + 3 * prompt_width).view(3, prompt_width)
    completion_mask = torch.zeros(rows, width, dtype=torch.long)
    for row, length in enumerate(lengths):
        completion_mask[row, :length] = 1
    return {
        "prompt_ids": prompts[owners],
        "prompt_mask": torch.ones(rows, prompt_width, dtype=torch.long),
        "completion_ids": torch.arange(rows * width).view(rows, width) * completion_mask,
        "completion_mask": completion_mask,
        "tool_mask": torch.ones(rows, width, dtype=torch.long),
        "advantages": torch.randn(rows, width),
        "num_items_in_batch": torch.tensor(float(sum(lengths))),
    }


def test_completion_lengths_count_to_the_last_unmasked_position():
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]])
    assert completion_lengths(mask).tolist() == [2, 3, 0, 4]


def test_whole_groups_are_packed_under_the_budget():
    inputs = batch([3, 5, 2, 4, 6, 1], owners=[0, 0, 1, 1, 2, 2])
    passes = plan_passes(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_mask"], budget=2 * (4 + 5) * 2)
    # group costs: 2 x (4 + 5) = 18, 2 x (4 + 4) = 16, 2 x (4 + 6) = 20; the first two fit 36 together
    assert [p.tolist() for p in passes] == [[0, 1, 2, 3], [4, 5]]


def test_a_group_over_the_budget_is_split_into_runs_of_its_rows():
    inputs = batch([9, 9, 9, 2, 2], owners=[0, 0, 0, 1, 1])
    passes = plan_passes(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_mask"], budget=26)
    assert [p.tolist() for p in passes] == [[0, 1], [2], [3, 4]]
    assert sorted(r for p in passes for r in p.tolist()) == list(range(5))
    one_row = plan_passes(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_mask"], budget=1)
    assert [p.tolist() for p in one_row] == [[0], [1], [2], [3], [4]]  # a row over the budget still runs, alone


def test_a_budget_that_is_not_positive_is_refused():
    inputs = batch([3], owners=[0])
    with pytest.raises(ValueError, match="positive number of tokens"):
        plan_passes(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_mask"], budget=0)


def test_a_pass_keeps_its_rows_and_cuts_completion_columns_at_its_longest():
    inputs = batch([3, 7, 2, 4], owners=[0, 0, 1, 1])
    part = take_rows(inputs, torch.tensor([2, 3]))
    assert part["completion_ids"].shape == (2, 4) and part["advantages"].shape == (2, 4)
    assert part["prompt_ids"].shape == (2, 4)  # the prompt's columns are not cut
    assert torch.equal(part["completion_ids"], inputs["completion_ids"][[2, 3], :4])
    assert part["num_items_in_batch"] is inputs["num_items_in_batch"]  # shared by every pass


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo", "dr_grpo"])
def test_weights_make_the_passes_sum_to_the_one_pass_loss(loss_type):
    """Each pass's loss computed the way TRL's _compute_loss normalises it, times its weight, sums to the
    loss of the whole batch."""
    inputs = batch([3, 7, 2, 4, 5], owners=[0, 0, 1, 1, 2])
    # fixed values in float64: the identity is exact, so only rounding can part the sides (in float32 an
    # unlucky draw whose terms nearly cancel moved the ratio by 3e-6)
    per_token = torch.randn(5, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(0))

    def loss(part, rows):
        values, mask = per_token[rows][:, : part["completion_mask"].size(1)], part["completion_mask"].float()
        if loss_type == "dapo":
            return (values * mask).sum() / part["num_items_in_batch"]
        if loss_type == "grpo":
            return ((values * mask).sum(-1) / mask.sum(-1)).mean()
        if loss_type == "bnpo":
            return (values * mask).sum() / mask.sum()
        return (values * mask).sum() / (mask.size(0) * 10)  # dr_grpo: rows x max_completion_length

    whole = loss(inputs, torch.arange(5))
    passes = [torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([4])]
    total = sum(loss(take_rows(inputs, p), p) * pass_weight(loss_type, take_rows(inputs, p), inputs) for p in passes)
    assert float(total) == pytest.approx(float(whole), rel=1e-12)


def test_a_loss_whose_normalisation_spans_the_window_is_not_split():
    inputs = batch([3], owners=[0])
    with pytest.raises(ValueError, match="cannot be split"):
        pass_weight("luspo", inputs, inputs)
