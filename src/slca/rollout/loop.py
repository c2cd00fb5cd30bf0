"""The multi-turn agent loop with Hugging Face `generate`, batched over episodes.

Each turn: generate an assistant turn for every live episode at once, parse its `<tool_call>`
blocks, answer each block through the episode's environment session (`env_factory(task)` ->
object with `.call(raw_block)` returning a ToolResult), append the tool messages with the chat
template's own tokens, and continue; an episode stops at a turn without a closed tool call, at
the token budget, or after `max_turns` tool-calling rounds (as TRL's
`max_tool_calling_iterations`). The token record is one list after the prompt:
`response_mask` is 1 on tokens the policy wrote and 0 on tool-response/template tokens the
environment injected. Rewards (HierR) are computed at the end with `slca.rewards`.

    episodes = run_episodes(model, tokenizer, tasks, env_factory=make_env, max_turns=3,
                            max_new_tokens=192, temperature=1.0, num_samples=4, seed=0)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from slca.rollout.chat import prompt_messages, tool_content, tool_message

_CLOSED_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass
class Episode:
    """One rollout: dialogue, token record with its response mask, and its rewards."""

    task: Mapping[str, Any]
    sample_idx: int
    prompt_ids: list[int]
    messages: list[dict[str, Any]] = field(default_factory=list)
    assistant_turns: list[str] = field(default_factory=list)
    tool_responses: list[str] = field(default_factory=list)
    calls: list[list[str]] = field(default_factory=list)  # raw block bodies per assistant turn
    completion_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    stop_reason: str = ""  # "answer" | "max_turns" | "length"
    tool_reward: Any = None
    r_tool: float = 0.0
    r_sum: float = 0.0
    penalty: bool = False

    @property
    def task_id(self) -> str:
        return str(self.task.get("id", ""))

    @property
    def n_generated(self) -> int:
        return sum(self.response_mask)

    @property
    def summary(self) -> str:
        """The final answer: the last assistant turn without tool-call blocks."""
        if not self.assistant_turns:
            return ""
        text = _CLOSED_BLOCK.sub("", self.assistant_turns[-1])
        return text.replace("<tool_call>", "").replace("</tool_call>", "").strip()

    def append(self, ids: Sequence[int], learned: bool) -> None:
        self.completion_ids.extend(ids)
        self.response_mask.extend([1 if learned else 0] * len(ids))


def tool_blocks(text: str) -> list[str]:
    """Bodies of the closed `<tool_call>` blocks of one turn, in order."""
    return [body.strip() for body in _CLOSED_BLOCK.findall(text)]


def turn_text(tokenizer: Any, ids: Sequence[int]) -> str:
    """Decoded assistant turn: tool tags kept (they are not special), control tokens dropped."""
    return tokenizer.decode(list(ids), skip_special_tokens=True).strip()


def result_text(result: Any) -> str:
    """Tool-message text of a ToolResult / ExecResult."""
    if hasattr(result, "to_message"):
        return result.to_message()
    return tool_content(bool(result.ok), result.content, result.error)


def tool_suffix_ids(tokenizer: Any, tool_messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Template tokens that follow an assistant turn's end token: tool messages + next assistant header.

    Same construction as TRL's `_get_tool_suffix_ids`: render a dummy dialogue with and without the
    tool messages and keep the difference after the last end-of-turn token.
    """
    dummy = [{"role": "user", "content": "dummy"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}]}]
    prefix = tokenizer.apply_chat_template(dummy, tokenize=True, return_dict=False)
    full = tokenizer.apply_chat_template(dummy + list(tool_messages), tokenize=True, return_dict=False,
                                         add_generation_prompt=True)
    ends = [i for i, token in enumerate(prefix) if token == tokenizer.eos_token_id]
    if ends:
        prefix = prefix[: ends[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise ValueError("chat template is not prefix-preserving around tool messages")
    return list(full[len(prefix):])


def prompt_ids_of(task: Mapping[str, Any], tokenizer: Any) -> list[int]:
    from slca.train.policy import render_prompt

    return tokenizer(render_prompt(task, tokenizer), add_special_tokens=False)["input_ids"]


@torch.no_grad()
def generate_turns(model: Any, tokenizer: Any, sequences: Sequence[Sequence[int]], *, max_new_tokens: int,
                   temperature: float, seed: int) -> list[list[int]]:
    """One assistant turn per sequence (left-padded batch); each result ends at the end token if reached."""
    width = max(len(seq) for seq in sequences)
    pad = tokenizer.pad_token_id
    device = next(model.parameters()).device
    input_ids = torch.tensor([[pad] * (width - len(s)) + list(s) for s in sequences], device=device)
    attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=device)
    torch.manual_seed(seed)
    sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} if temperature > 0 \
        else {"do_sample": False}
    output = model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=max_new_tokens,
                            eos_token_id=tokenizer.eos_token_id, pad_token_id=pad, **sampling)
    turns = []
    for row in output[:, width:].tolist():
        if tokenizer.eos_token_id in row:
            row = row[: row.index(tokenizer.eos_token_id) + 1]
        turns.append(row)
    return turns


def answer_turn(episode: Episode, session: Any, tokenizer: Any, text: str) -> bool:
    """Answer the closed tool calls of a turn; True when the episode continues."""
    blocks = tool_blocks(text)
    episode.calls.append(blocks)
    if not blocks:
        return False
    messages = []
    for body in blocks:
        result = session.call(body)
        content = result_text(result)
        episode.tool_responses.append(content)
        messages.append(tool_message(getattr(result, "name", None) or "tool", content))
    episode.messages.extend(messages)
    episode.append(tool_suffix_ids(tokenizer, messages), learned=False)
    return True


def run_episodes(model: Any, tokenizer: Any, tasks: Sequence[Mapping[str, Any]], *,
                 env_factory: Callable[[Mapping[str, Any]], Any], max_turns: int, max_new_tokens: int,
                 temperature: float, num_samples: int = 1, seed: int = 0, batch_size: int = 16,
                 reward_fn: Callable[[Episode], None] | None = None) -> list[Episode]:
    """Roll out `num_samples` episodes per task; temperature 0 = greedy. Rewards via `reward_fn`."""
    was_training = model.training
    model.eval()
    episodes = [Episode(task, sample, prompt_ids_of(task, tokenizer), messages=prompt_messages(task))
                for task in tasks for sample in range(num_samples)]
    sessions = [env_factory(episode.task) for episode in episodes]
    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    live = list(range(len(episodes)))
    for round_index in range(max_turns + 1):
        for i in live:
            if len(episodes[i].prompt_ids) + len(episodes[i].completion_ids) + 1 >= limit:
                episodes[i].stop_reason = "length"
        live = [i for i in live if episodes[i].stop_reason != "length"]
        for start in range(0, len(live), batch_size):
            chunk = live[start:start + batch_size]
            budgets = [min(max_new_tokens, limit - len(episodes[i].prompt_ids) - len(episodes[i].completion_ids))
                       for i in chunk]
            turns = generate_turns(model, tokenizer,
                                   [episodes[i].prompt_ids + episodes[i].completion_ids for i in chunk],
                                   max_new_tokens=min(budgets), temperature=temperature,
                                   seed=seed * 1_000_003 + round_index * 1009 + start)
            for i, ids in zip(chunk, turns, strict=True):
                episode = episodes[i]
                episode.append(ids, learned=True)
                text = turn_text(tokenizer, ids)
                episode.assistant_turns.append(text)
                episode.messages.append({"role": "assistant", "content": text})
                episode.stop_reason = "answer" if ids and ids[-1] == tokenizer.eos_token_id else "length"
        still = []
        for i in live:
            episode = episodes[i]
            if episode.stop_reason == "length":
                episode.calls.append(tool_blocks(episode.assistant_turns[-1]))
                continue
            if round_index == max_turns:
                episode.calls.append(tool_blocks(episode.assistant_turns[-1]))
                episode.stop_reason = "max_turns" if episode.calls[-1] else "answer"
                continue
            if answer_turn(episode, sessions[i], tokenizer, episode.assistant_turns[-1]):
                still.append(i)
        live = still
        if not live:
            break
    if was_training:
        model.train()
    if reward_fn is not None:
        for episode in episodes:
            reward_fn(episode)
    return episodes
