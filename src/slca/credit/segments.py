"""Split each rollout's learned tokens into a tool (process) segment and a summary segment.

Mask rule (`segment_masks`, DESIGN §1): the contiguous runs of 1s in the response mask are the
policy's turns (environment tokens are 0). The last run is the summary segment; the union of
all earlier runs is the tool segment. A single run is summary-only; an all-zero row has
neither. The two masks partition the learned tokens exactly. Fully vectorised: the summary is
every learned token at or after the row's last run start (a max over run-start positions), so
there is no Python loop over rows or tokens; `run_ids` numbers runs with a cumulative sum.

Truncation after a tool call: when generation stops right after the policy wrote a tool call
(budget exhausted, no tool response followed), the last run is a tool call, not a summary. The
mask cannot see that, so the caller may pass `last_run_has_tool_call` (bool per row); with
`truncated_tool_call_as_tool=True` (default) a flagged row's last run is labelled tool and its
summary is empty. With the flag off, or no flags given, the plain mask rule applies.

Tag rule (`segment_by_tags`): from the rollout text and each token's character offsets, a
learned token is a tool token when it overlaps a `<tool_call>…</tool_call>` span (an unclosed
span runs to the end of the text); the rest of a learned run (turn) that contains such a token
is tool as well, because the reasoning written before a call is part of the same decision and
this keeps the two rules in agreement on well-formed rollouts. Learned runs with no tool call
are summary. `segmentations_agree` compares two segmentations row by row, e.g. to flag rollouts
whose structure the mask rule mislabels (a final turn that is a tool call, a middle turn that
is plain text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
from torch import Tensor

_TOOL_SPAN = re.compile(r"<tool_call>.*?(?:</tool_call>|\Z)", re.DOTALL)


def run_starts(learned: Tensor) -> Tensor:
    """Bool: the token is learned and the one before it is not (or it is the first token)."""
    previous = torch.zeros_like(learned)
    previous[..., 1:] = learned[..., :-1]
    return learned & ~previous


def run_ids(response_mask: Tensor) -> tuple[Tensor, Tensor]:
    """Per-token 1-based id of the learned run it belongs to (0 off-mask) and runs per row."""
    learned = response_mask.bool()
    starts = run_starts(learned)
    ids = torch.cumsum(starts, dim=-1) * learned
    return ids, starts.sum(dim=-1)


def positions(learned: Tensor) -> Tensor:
    """Token positions 0..T-1, broadcastable against `learned`."""
    return torch.arange(learned.shape[-1], device=learned.device)


def last_run_start(learned: Tensor) -> Tensor:
    """Position where the last learned run starts (-1 for a row with none), per row."""
    if learned.shape[-1] == 0:
        return torch.full(learned.shape[:-1], -1, dtype=torch.long, device=learned.device)
    return torch.where(run_starts(learned), positions(learned), -1).amax(dim=-1)


def segment_masks(
    response_mask: Tensor,
    *,
    last_run_has_tool_call: Tensor | None = None,
    truncated_tool_call_as_tool: bool = True,
) -> tuple[Tensor, Tensor]:
    """Return bool (tool_mask, summary_mask) shaped like `response_mask` ([B, T] or [T])."""
    learned = response_mask.bool()
    summary = learned & (positions(learned) >= last_run_start(learned).unsqueeze(-1))
    if truncated_tool_call_as_tool and last_run_has_tool_call is not None:
        flagged = last_run_has_tool_call.to(device=learned.device, dtype=torch.bool).unsqueeze(-1)
        summary = summary & ~flagged
    return learned & ~summary, summary


def _tool_call_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of `<tool_call>` blocks; an unclosed block runs to the end of the text."""
    return [(m.start(), m.end()) for m in _TOOL_SPAN.finditer(text)]


def _tag_masks_one(text: str, offsets: Tensor, learned: Tensor) -> tuple[Tensor, Tensor]:
    """Tag-rule masks of one rollout: offsets [T, 2] (char start, end), learned [T] bool."""
    starts, ends = offsets[:, 0], offsets[:, 1]
    in_call = torch.zeros_like(learned)
    for span_start, span_end in _tool_call_spans(text):  # a handful of spans per rollout
        in_call |= (starts < span_end) & (ends > span_start)
    in_call &= learned
    ids, n_runs = run_ids(learned)
    run_has_call = torch.zeros(int(n_runs) + 1, dtype=torch.bool, device=learned.device)
    run_has_call[ids[in_call]] = True
    run_has_call[0] = False  # id 0 marks off-mask tokens
    tool = run_has_call[ids] & learned
    return tool, learned & ~tool


def segment_by_tags(
    text: str | Sequence[str],
    offsets: Tensor | Sequence[Sequence[tuple[int, int]]] | Sequence[tuple[int, int]],
    response_mask: Tensor,
) -> tuple[Tensor, Tensor]:
    """Tag-rule (tool_mask, summary_mask). One rollout: text str, offsets [T, 2], mask [T];
    a batch: list of B texts, offsets [B, T, 2], mask [B, T]. Padding tokens need mask 0."""
    learned = response_mask.bool()
    offs = torch.as_tensor(offsets, dtype=torch.long, device=learned.device)
    if isinstance(text, str):
        if learned.dim() != 1 or offs.shape != (learned.shape[0], 2):
            raise ValueError(
                f"segment_by_tags: one rollout needs offsets [T, 2] and mask [T]; got "
                f"{tuple(offs.shape)} and {tuple(learned.shape)}"
            )
        return _tag_masks_one(text, offs, learned)
    if learned.dim() != 2 or offs.shape != (*learned.shape, 2) or len(text) != learned.shape[0]:
        raise ValueError(
            f"segment_by_tags: a batch needs B texts, offsets [B, T, 2] and mask [B, T]; got "
            f"{len(text)}, {tuple(offs.shape)} and {tuple(learned.shape)}"
        )
    rows = [_tag_masks_one(t, o, m) for t, o, m in zip(text, offs, learned)]
    return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])


def segmentations_agree(first: tuple[Tensor, Tensor], second: tuple[Tensor, Tensor]) -> Tensor:
    """Per-row bool: both (tool_mask, summary_mask) pairs label every token the same way."""
    (tool_a, sum_a), (tool_b, sum_b) = first, second
    same = (tool_a.bool() == tool_b.bool()) & (sum_a.bool() == sum_b.bool())
    return same.all(dim=-1)
