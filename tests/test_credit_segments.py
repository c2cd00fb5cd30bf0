"""Segmentation: mask rule (vectorised runs), truncation flag, tag rule and their agreement."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from slca.credit.segments import (
    run_ids,
    segment_by_tags,
    segment_masks,
    segmentations_agree,
)

masks = st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=24), min_size=1, max_size=6).map(
    lambda rows: torch.tensor([r + [0] * (24 - len(r)) for r in rows])
)


def _runs(row: list[int]) -> list[list[int]]:
    """Reference: positions of each contiguous run of 1s."""
    runs, current = [], []
    for i, v in enumerate(row):
        if v:
            current.append(i)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def test_hand_built_rows():
    mask = torch.tensor(
        [
            [0, 1, 1, 0, 0, 1, 1, 0],  # tool run, env, summary run
            [1, 1, 1, 0, 0, 0, 0, 0],  # single run: summary only
            [0, 0, 0, 0, 0, 0, 0, 0],  # nothing learned
            [1, 0, 1, 0, 1, 0, 0, 1],  # three tool runs, summary is the last token
        ]
    )
    tool, summary = segment_masks(mask)
    assert tool.dtype == torch.bool and summary.dtype == torch.bool
    assert tool.int().tolist() == [
        [0, 1, 1, 0, 0, 0, 0, 0],
        [0] * 8,
        [0] * 8,
        [1, 0, 1, 0, 1, 0, 0, 0],
    ]
    assert summary.int().tolist() == [
        [0, 0, 0, 0, 0, 1, 1, 0],
        [1, 1, 1, 0, 0, 0, 0, 0],
        [0] * 8,
        [0, 0, 0, 0, 0, 0, 0, 1],
    ]


def test_one_dimensional_row():
    tool, summary = segment_masks(torch.tensor([1, 0, 1, 1]))
    assert tool.int().tolist() == [1, 0, 0, 0] and summary.int().tolist() == [0, 0, 1, 1]


@settings(max_examples=150, deadline=None)
@given(masks)
def test_masks_partition_learned_tokens_and_match_reference(mask):
    tool, summary = segment_masks(mask)
    assert not bool((tool & summary).any())
    assert torch.equal(tool | summary, mask.bool())
    for b, row in enumerate(mask.tolist()):
        runs = _runs(row)
        expect_summary = set(runs[-1]) if runs else set()
        expect_tool = {i for r in runs[:-1] for i in r}
        assert set(summary[b].nonzero().flatten().tolist()) == expect_summary
        assert set(tool[b].nonzero().flatten().tolist()) == expect_tool
    _, n_runs = run_ids(mask)
    assert n_runs.tolist() == [len(_runs(r)) for r in mask.tolist()]


def test_truncated_tool_call_flag_moves_last_run_to_tool():
    mask = torch.tensor([[1, 1, 0, 1, 1], [1, 1, 0, 1, 1], [1, 1, 1, 0, 0]])
    flags = torch.tensor([True, False, True])
    tool, summary = segment_masks(mask, last_run_has_tool_call=flags)
    assert tool.int().tolist() == [[1, 1, 0, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0]]
    assert summary.int().tolist() == [[0] * 5, [0, 0, 0, 1, 1], [0] * 5]
    plain = segment_masks(mask, last_run_has_tool_call=flags, truncated_tool_call_as_tool=False)
    assert segmentations_agree(plain, segment_masks(mask)).all()


def _tokenise(pieces: list[tuple[str, int]]) -> tuple[str, list[tuple[int, int]], torch.Tensor]:
    """Text, char offsets and mask from (piece, learned) pairs, one token per piece."""
    text, offsets, learned = "", [], []
    for piece, flag in pieces:
        offsets.append((len(text), len(text) + len(piece)))
        text += piece
        learned.append(flag)
    return text, offsets, torch.tensor(learned)


WELL_FORMED = [
    ("Let me check. ", 1),
    ("<tool_call>", 1),
    ('{"name": "get_weather", ', 1),
    ('"arguments": {"city": "Lima"}}', 1),
    ("</tool_call>", 1),
    ("<tool_response>", 0),
    ('{"temp_c": 19}', 0),
    ("</tool_response>", 0),
    ("It is 19 C ", 1),
    ("in Lima.", 1),
]


def test_tag_rule_labels_whole_calling_turn_and_agrees_on_well_formed():
    text, offsets, learned = _tokenise(WELL_FORMED)
    tool, summary = segment_by_tags(text, offsets, learned)
    assert tool.int().tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    assert summary.int().tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    assert bool(segmentations_agree((tool, summary), segment_masks(learned)))


def test_tag_rule_sees_truncated_tool_call_the_mask_rule_misses():
    pieces = WELL_FORMED[:8] + [("<tool_call>", 1), ('{"name": "get_time", "arguments": {}}', 1)]
    text, offsets, learned = _tokenise(pieces)
    by_tags = segment_by_tags(text, offsets, learned)
    assert by_tags[1].sum() == 0 and by_tags[0].sum() == 7
    assert not bool(segmentations_agree(by_tags, segment_masks(learned)))
    flagged = segment_masks(learned.unsqueeze(0), last_run_has_tool_call=torch.tensor([True]))
    batch_tags = segment_by_tags([text], torch.tensor([offsets]), learned.unsqueeze(0))
    assert segmentations_agree(batch_tags, flagged).tolist() == [True]


def test_tag_rule_rejects_mismatched_shapes():
    text, offsets, learned = _tokenise(WELL_FORMED)
    try:
        segment_by_tags(text, offsets[:-1], learned)
    except ValueError as error:
        assert "offsets [T, 2]" in str(error)
    else:
        raise AssertionError("mismatched offsets were accepted")


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 3), st.booleans(), st.integers(1, 3))
def test_tag_and_mask_rules_agree_on_well_formed_rollouts(n_calls, think_first, summary_tokens):
    pieces: list[tuple[str, int]] = []
    for i in range(n_calls):
        if think_first:
            pieces.append((f"Step {i}: I need data. ", 1))
        pieces += [
            ("<tool_call>", 1),
            (f'{{"name": "t{i}", "arguments": {{}}}}', 1),
            ("</tool_call>", 1),
            ("<tool_response>", 0),
            ('{"ok": true}', 0),
            ("</tool_response>", 0),
        ]
    pieces += [("Answer. ", 1)] * summary_tokens + [("", 0)]  # trailing padding token
    text, offsets, learned = _tokenise(pieces)
    by_tags, by_mask = segment_by_tags(text, offsets, learned), segment_masks(learned)
    assert bool(segmentations_agree(by_tags, by_mask))
    assert int(by_mask[1].sum()) == summary_tokens
