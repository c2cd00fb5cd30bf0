"""The credit explorer's data: a sample's rollouts as prompt groups, sign flips against GRPO, filters.

A GRPO group is the G rollouts of one prompt; the trainer writes each rollout's group id (`group`)
into the advantage sample, and older samples without it are cut into consecutive runs of G. A token
*flips* when its advantage under the active estimator and under GRPO have opposite non-zero signs;
R_tool and R_sum *disagree* in a group when some rollout is above the group mean on one and below
it on the other (the case where segment-locked credit and one trajectory advantage part ways).
Free of Streamlit, like `slca.dashboard_data`.

    groups = sample_groups(sample, num_generations=4)
    shown = filter_groups(groups, kind="parallel", only_flips=True)
    html = group_html(shown[0], ("advantages", "advantages_grpo"), group_scale(shown[0]), "slca")
"""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from slca.dashboard_data import TOKEN_CSS, sign, token_kind, tokens_html

SEGMENTS = ("tool", "summary")
R_TOOL_COMPONENTS = ("fmt", "name", "key", "value", "parallel")
VIEWS = {"advantages": "estimator", "advantages_grpo": "grpo"}


@dataclass(frozen=True)
class RolloutGroup:
    """The rollouts of one prompt in one sample, with their sign flips against GRPO."""

    group: int
    prompt_id: str
    kind: str
    rollouts: tuple[Mapping[str, Any], ...]
    flips: tuple[dict[str, int], ...]  # per rollout: {segment: tokens whose sign flips}

    @property
    def flip_total(self) -> dict[str, int]:
        return {segment: sum(f[segment] for f in self.flips) for segment in SEGMENTS}

    @property
    def has_flips(self) -> bool:
        return any(self.flip_total.values())

    @property
    def rewards_disagree(self) -> bool:
        return rewards_disagree(self.rollouts)

    @property
    def label(self) -> str:
        flips = self.flip_total
        return (
            f"group {self.group} · {self.prompt_id} · {self.kind} · {len(self.rollouts)} rollouts · "
            f"flips tool {flips['tool']} / summary {flips['summary']}"
        )


def flipped_tokens(rollout: Mapping[str, Any]) -> list[bool]:
    """Per token: learned, and its estimator and GRPO advantages have opposite non-zero signs."""
    return [
        token_kind(rollout, i) != "env"
        and sign(float(rollout["advantages"][i])) * sign(float(rollout["advantages_grpo"][i])) < 0
        for i in range(len(rollout["tokens"]))
    ]


def flip_counts(rollout: Mapping[str, Any]) -> dict[str, int]:
    """{segment: number of its tokens whose sign flips between the estimator and GRPO}."""
    counts = dict.fromkeys(SEGMENTS, 0)
    for index, flipped in enumerate(flipped_tokens(rollout)):
        if flipped:
            counts[token_kind(rollout, index)] += 1
    return counts


def rewards_disagree(rollouts: Sequence[Mapping[str, Any]], eps: float = 1e-9) -> bool:
    """Some rollout is above the group mean on R_tool and below it on R_sum, or the reverse."""
    scored = [
        r for r in rollouts if isinstance(r.get("r_tool"), (int, float)) and isinstance(r.get("r_sum"), (int, float))
    ]
    if len(scored) < 2:
        return False
    tool_mean = statistics.fmean(float(r["r_tool"]) for r in scored)
    sum_mean = statistics.fmean(float(r["r_sum"]) for r in scored)
    return any(sign(float(r["r_tool"]) - tool_mean, eps) * sign(float(r["r_sum"]) - sum_mean, eps) < 0 for r in scored)


def group_ids(rollouts: Sequence[Mapping[str, Any]], num_generations: int) -> list[int]:
    """The trainer's group id of each rollout; consecutive runs of `num_generations` when absent."""
    if all(isinstance(r.get("group"), int) for r in rollouts):
        return [int(r["group"]) for r in rollouts]
    return [int(r.get("sample_idx", i)) // max(1, num_generations) for i, r in enumerate(rollouts)]


def sample_groups(sample: Mapping[str, Any], num_generations: int = 4) -> list[RolloutGroup]:
    """The sample's rollouts grouped by prompt group, in order of first appearance."""
    rollouts = list(sample.get("rollouts") or [])
    members: dict[int, list[Mapping[str, Any]]] = {}
    for group, rollout in zip(group_ids(rollouts, num_generations), rollouts):
        members.setdefault(group, []).append(rollout)
    return [
        RolloutGroup(
            group,
            str(rows[0].get("prompt_id") or "?"),
            str(rows[0].get("kind") or "unknown"),
            tuple(rows),
            tuple(flip_counts(r) for r in rows),
        )
        for group, rows in members.items()
    ]


def filter_groups(
    groups: Sequence[RolloutGroup], kind: str | None = None, only_flips: bool = False, only_disagreeing: bool = False
) -> list[RolloutGroup]:
    """Groups of task kind `kind` (None: any), with sign flips and/or R_tool-R_sum disagreement if asked."""
    return [
        g
        for g in groups
        if (kind is None or g.kind == kind)
        and (not only_flips or g.has_flips)
        and (not only_disagreeing or g.rewards_disagree)
    ]


def group_scale(group: RolloutGroup, keys: Sequence[str] = tuple(VIEWS)) -> float:
    """Largest finite |advantage| on learned tokens of any rollout under any of `keys`: one scale per group."""
    values = [
        abs(float(r[key][i]))
        for r in group.rollouts
        for key in keys
        if key in r
        for i in range(len(r["tokens"]))
        if token_kind(r, i) != "env"
    ]
    return max([v for v in values if math.isfinite(v)], default=0.0) or 1.0


def rewards_line(rollout: Mapping[str, Any]) -> str:
    """`R_tool 0.80 (fmt 1.00 · name 1.00 · …) · R_sum 0.10`, missing numbers left out."""

    def number(key: str) -> str | None:
        value = rollout.get(key)
        return f"{float(value):.2f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    parts = [f"{k} {number(k)}" for k in R_TOOL_COMPONENTS if number(k) is not None]
    tool = f"R_tool {number('r_tool') or '–'}" + (f" ({' · '.join(parts)})" if parts else "")
    return f"{tool} · R_sum {number('r_sum') or '–'}"


def rollout_html(rollout: Mapping[str, Any], index: int, keys: Sequence[str], scale: float, estimator: str) -> str:
    """One rollout: its rewards and flip counts, then one token row per advantage key."""
    flips, flipped = flip_counts(rollout), flipped_tokens(rollout)
    head = (
        f'<div class="slca-rollout-head" style="font-size:0.8rem;color:#333;margin-top:6px;">'
        f"<b>#{index}</b> · {html.escape(rewards_line(rollout))} · sign flips: tool {flips['tool']}, "
        f"summary {flips['summary']}</div>"
    )
    rows = []
    for key in keys:
        name = estimator if VIEWS[key] == "estimator" else "grpo"
        label = f'<div style="font-size:0.7rem;color:#666;">{html.escape(name)}</div>' if len(keys) > 1 else ""
        rows.append(
            f'<div class="slca-tokens" data-view="{VIEWS[key]}" style="flex:1;min-width:0;">{label}'
            f"{tokens_html(rollout, key, scale, flipped)}</div>"
        )
    body = '<div style="display:flex;gap:12px;">' + "".join(rows) + "</div>"
    return (
        f'<div class="slca-rollout" style="font-family:monospace;font-size:0.85rem;line-height:1.9;'
        f'border-top:1px solid #ddd;padding:2px 0;">{head}{body}</div>'
    )


def group_html(group: RolloutGroup, keys: Sequence[str], scale: float, estimator: str) -> str:
    """Every rollout of the group stacked, one line of HTML (markdown keeps it as one block), with its styles."""
    return (
        TOKEN_CSS
        + '<div class="slca-group">'
        + "".join(rollout_html(r, i, keys, scale, estimator) for i, r in enumerate(group.rollouts))
        + "</div>"
    )


def flip_summary_html(group: RolloutGroup) -> str:
    """The group's sign-flip count per segment, as the page states it."""
    flips = group.flip_total
    return (
        f'<div class="slca-flip-count" data-tool="{flips["tool"]}" data-summary="{flips["summary"]}">'
        f"<b>tokens whose sign flips between the estimator and GRPO</b>: tool {flips['tool']} · "
        f"summary {flips['summary']}</div>"
    )


def group_frame(group: RolloutGroup) -> pd.DataFrame:
    """One row per rollout: rewards, R_tool components, mean advantage per segment and view, flips."""
    rows = []
    for index, (rollout, flips) in enumerate(zip(group.rollouts, group.flips)):
        row: dict[str, Any] = {"rollout": index}
        for key in ("r_tool", *R_TOOL_COMPONENTS, "r_sum"):
            value = rollout.get(key)
            row[key] = float(value) if isinstance(value, (int, float)) else float("nan")
        for segment in SEGMENTS:
            index_of = [i for i in range(len(rollout["tokens"])) if token_kind(rollout, i) == segment]
            for key, view in VIEWS.items():
                values = [float(rollout[key][i]) for i in index_of]
                row[f"A {segment} ({view})"] = statistics.fmean(values) if values else 0.0
            row[f"flips {segment}"] = flips[segment]
        rows.append(row)
    return pd.DataFrame(rows).set_index("rollout")


def kinds_of(groups: Sequence[RolloutGroup]) -> list[str]:
    return sorted({g.kind for g in groups})
