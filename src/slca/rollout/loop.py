"""The rollout engine: one episode type, one turn loop, one stop rule, for training and evaluation.

A rollout is the policy's assistant turns interleaved with tool responses, kept as one token list
after the prompt. Each round the engine asks a **turn generator** for the next assistant turn of
every live episode, decodes it to canonical text (`<tool_call>` blocks, whatever tags the policy's
chat template writes: `slca.rollout.chat_format`), parses its blocks, answers each block through the episode's
environment session (`env_factory(task)` -> object with `.call(raw_block)` returning a
ToolResult) and appends the tool messages with the chat template's own tokens. `response_mask`
is 1 on tokens the policy wrote and 0 on the tokens the environment injected.

The generator is pluggable (`TurnGenerator`): `HFTurnGenerator` (Hugging Face `generate`, used for
evaluation and on CPU), TRL's generation including vLLM (`slca.train.grpo_rollout`), or a
scripted one (`slca.rollout.scripted`, the reward audit and the tests). Everything else — stop
rule, context limits, the summary, what counts as an observation — is decided here, once.

Stop rule, per episode and round:
- before generating, an episode with no room left in its own context (prompt + completion ≥
  the generator's context limit) stops with `length`; each episode's turn is cut at its own
  budget min(max_new_tokens, room) (per-episode limits, not a batch minimum);
- a turn that did not end at a stop token (the chat template's end of turn, the tokenizer's and the
  generation config's end tokens: `ChatFormat.stop_ids`) stops the episode (`length`);
- a turn without a closed `<tool_call>` block is the final answer (`answer`);
- a tool-calling turn in the last round (`max_turns` tool rounds done) stops with `max_turns`;
- otherwise the calls are answered; when the tool messages plus one more token would not fit,
  the episode stops (`length`) and the responses are **not** recorded: the policy never saw them.

The **summary** is the last assistant turn when it holds no `<tool_call>` tag, else "" (the
rollout ended on a call: it has no summary segment — the credit segmentation labels that run
tool, `credit.truncated_tool_call_as_tool`).

Several processes (training under accelerate): every process runs the same number of rounds
and asks its generator for equal-size batches — all of its episodes every round, finished ones
included as padding whose output is discarded — and the loop ends only when no process has a
live episode (`TurnGenerator.any_live`). vLLM server mode and ZeRO-3 gather collectively, so
uneven turn counts can no longer deadlock them or hand a process another's completions.

    episodes = run_episodes(HFTurnGenerator(model, tokenizer, temperature=0.0), tasks,
                            env_factory=make_env, max_turns=2, max_new_tokens=96)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from slca.rollout.chat import prompt_messages, render_prompt, tool_content, tool_message
from slca.rollout.chat_format import chat_format, render
from slca.rollout.memory import release_freed_memory

_CLOSED_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


@dataclass
class Episode:
    """One rollout: dialogue, token record with its response mask, observations and rewards."""

    task: Mapping[str, Any]
    sample_idx: int
    prompt_ids: list[int]
    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)  # assistant turn texts, tool tags kept
    observations: list[tuple[str, str]] = field(default_factory=list)  # (tool name, message) the policy saw
    calls: list[list[str]] = field(default_factory=list)  # closed call-block bodies per assistant turn
    completion_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    stop_reason: str = ""  # "answer" | "max_turns" | "length"
    scores: dict[str, float] = field(default_factory=dict)  # HierR and baseline rewards (scoring)
    tool_reward: Any = None
    parsed: list[Any] = field(default_factory=list)  # ParsedCalls per turn, set by scoring

    @property
    def task_id(self) -> str:
        return str(self.task.get("id", ""))

    @property
    def assistant_turns(self) -> list[str]:
        return self.turns

    @property
    def tool_responses(self) -> list[str]:
        return [text for _, text in self.observations]

    @property
    def n_generated(self) -> int:
        return sum(self.response_mask)

    @property
    def last_turn_has_tool_call(self) -> bool:
        return bool(self.turns) and "<tool_call>" in self.turns[-1]

    @property
    def summary(self) -> str:
        """The final answer: the last turn when it holds no tool-call tag, else ""."""
        if not self.turns or self.last_turn_has_tool_call:
            return ""
        return self.turns[-1].strip()

    @property
    def r_tool(self) -> float:
        return float(self.scores.get("r_tool", 0.0))

    @property
    def r_sum(self) -> float:
        return float(self.scores.get("r_sum", 0.0))

    @property
    def penalty(self) -> bool:
        return bool(self.scores.get("penalty", 0.0))

    @property
    def sequence(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    def append(self, ids: Sequence[int], learned: bool, logprobs: Sequence[float] | None = None) -> None:
        self.completion_ids.extend(ids)
        self.response_mask.extend([1 if learned else 0] * len(ids))
        self.logprobs.extend(list(logprobs) if logprobs is not None else [0.0] * len(ids))


@dataclass
class Turn:
    """One generated assistant turn: token ids (ending at an end token when one was reached)."""

    ids: list[int]
    logprobs: list[float] | None = None


class TurnGenerator(Protocol):
    """What the engine needs from a generation backend."""

    tokenizer: Any
    eos_token_ids: set[int]
    context_limit: int

    def generate(self, episodes: Sequence[Episode], budgets: Sequence[int], round_index: int) -> list[Turn]:
        """The next assistant turn of each episode, at most `budgets[i]` tokens each."""
        ...

    def tool_suffix(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Template tokens of tool messages plus the next assistant header."""
        ...

    def any_live(self, local_live: bool) -> bool | None:
        """Under several processes: whether any process has a live episode (a collective every
        process calls once per round); None when there is one process."""
        ...


def call_key(body: str) -> str:
    """Canonical text of one call block (name + arguments), so equal calls compare equal."""
    try:
        return json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):
        return body.strip()


def tool_blocks(text: str) -> list[str]:
    """Bodies of the closed `<tool_call>` blocks of one turn, in order."""
    return [body.strip() for body in _CLOSED_BLOCK.findall(text)]


def turn_text(tokenizer: Any, ids: Sequence[int]) -> str:
    """Decoded assistant turn in canonical form: stop and control tokens dropped, calls in `<tool_call>`
    tags whatever tags the policy's chat template writes (`ChatFormat.turn_text`)."""
    return chat_format(tokenizer).turn_text(tokenizer, ids)


def result_text(result: Any) -> str:
    """Tool-message text of a ToolResult / ExecResult."""
    if hasattr(result, "to_message"):
        return result.to_message()
    return tool_content(bool(result.ok), result.content, result.error)


def tool_suffix_ids(tokenizer: Any, tool_messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Template tokens that follow an assistant turn's end token: tool messages + next assistant header.

    Same construction as TRL's `_get_tool_suffix_ids`: render a dummy dialogue with and without the
    tool messages and keep the difference after the last end-of-turn token — the template's own end
    of turn, which need not be the tokenizer's end token (Gemma's `<end_of_turn>` vs `<eos>`).
    """
    end_of_turn = chat_format(tokenizer).end_of_turn_id
    dummy: list[dict[str, Any]] = [
        {"role": "user", "content": "dummy"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}],
        },
    ]
    prefix = render(tokenizer, dummy, tokenize=True, return_dict=False)
    full = render(tokenizer, dummy + list(tool_messages), tokenize=True, return_dict=False, add_generation_prompt=True)
    ends = [i for i, token in enumerate(prefix) if token == end_of_turn]
    if ends:
        prefix = prefix[: ends[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise ValueError("chat template is not prefix-preserving around tool messages")
    return list(full[len(prefix) :])


def prompt_ids_of(task: Mapping[str, Any], tokenizer: Any) -> list[int]:
    return list(tokenizer(render_prompt(task, tokenizer), add_special_tokens=False)["input_ids"])


def cut_turn(ids: Sequence[int], eos: set[int], budget: int) -> list[int]:
    """A generated row up to and including its first end token, at most `budget` tokens."""
    row = list(ids)
    for index, token in enumerate(row):
        if token in eos:
            row = row[: index + 1]
            break
    return row[: max(budget, 0)]


@torch.no_grad()
def generate_turns(
    model: Any,
    tokenizer: Any,
    sequences: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    temperature: float,
    seed: int,
) -> list[list[int]]:
    """One assistant turn per sequence (left-padded batch); each result ends at the end token if reached."""
    width = max(len(seq) for seq in sequences)
    pad = tokenizer.pad_token_id
    device = next(model.parameters()).device
    input_ids = torch.tensor([[pad] * (width - len(s)) + list(s) for s in sequences], device=device)
    attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=device)
    torch.manual_seed(seed)
    sampling = (
        {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        if temperature > 0
        else {"do_sample": False}
    )
    fmt = chat_format(tokenizer, model)
    output = model.generate(
        input_ids=input_ids,
        attention_mask=attention,
        max_new_tokens=max_new_tokens,
        eos_token_id=fmt.eos_token_id,
        pad_token_id=pad,
        **sampling,
    )
    return [cut_turn(row, set(fmt.stop_ids), max_new_tokens) for row in output[:, width:].tolist()]


class HFTurnGenerator:
    """Turns from a Hugging Face causal LM's `generate`, in batches of `batch_size` episodes.

    A batch is generated to its largest budget and each turn is then cut at its own budget, so
    one long episode does not shorten the turns of the others. Temperature 0 = greedy.
    """

    def __init__(
        self, model: Any, tokenizer: Any, *, temperature: float = 0.0, seed: int = 0, batch_size: int = 16
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.seed, self.batch_size = temperature, seed, batch_size
        self.eos_token_ids = set(chat_format(tokenizer, model).stop_ids)
        self.context_limit = int(getattr(model.config, "max_position_embeddings", None) or 1 << 30)

    def generate(self, episodes: Sequence[Episode], budgets: Sequence[int], round_index: int) -> list[Turn]:
        was_training = self.model.training
        self.model.eval()
        turns: list[Turn] = []
        for start in range(0, len(episodes), self.batch_size):
            chunk, limits = episodes[start : start + self.batch_size], budgets[start : start + self.batch_size]
            rows = generate_turns(
                self.model,
                self.tokenizer,
                [e.sequence for e in chunk],
                max_new_tokens=max(limits),
                temperature=self.temperature,
                seed=self.seed * 1_000_003 + round_index * 1009 + start,
            )
            turns.extend(
                Turn(cut_turn(row, self.eos_token_ids, limit)) for row, limit in zip(rows, limits, strict=True)
            )
        if was_training:
            self.model.train()
        return turns

    def tool_suffix(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        return tool_suffix_ids(self.tokenizer, messages)

    def any_live(self, local_live: bool) -> bool | None:
        return None


def answer_calls(session: Any, blocks: Sequence[str]) -> list[tuple[str, str]]:
    """(tool name, message text) answering each call block, in order."""
    answers = []
    for body in blocks:
        result = session.call(body)
        answers.append((getattr(result, "name", None) or "unknown", result_text(result)))
    return answers


def new_episodes(tasks: Sequence[Mapping[str, Any]], tokenizer: Any, num_samples: int = 1) -> list[Episode]:
    """`num_samples` fresh episodes per task, task-major (the order GRPO groups rows in)."""
    prompts = [prompt_ids_of(task, tokenizer) for task in tasks]
    return [
        Episode(task, sample, list(prompt), messages=prompt_messages(task))
        for task, prompt in zip(tasks, prompts, strict=True)
        for sample in range(num_samples)
    ]


def _take_turn(episode: Episode, turn: Turn, generator: TurnGenerator, session: Any, last_round: bool) -> bool:
    """Record one generated turn and answer its calls; True when the episode goes on."""
    episode.append(turn.ids, True, turn.logprobs)
    text = turn_text(generator.tokenizer, turn.ids)
    episode.turns.append(text)
    episode.messages.append({"role": "assistant", "content": text})
    blocks = tool_blocks(text)
    episode.calls.append(blocks)
    if not (turn.ids and turn.ids[-1] in generator.eos_token_ids):
        episode.stop_reason = "length"
        return False
    if not blocks:
        episode.stop_reason = "answer"
        return False
    if last_round:
        episode.stop_reason = "max_turns"
        return False
    answers = answer_calls(session, blocks)
    messages = [tool_message(name, text) for name, text in answers]
    suffix = generator.tool_suffix(messages)
    if len(episode.sequence) + len(suffix) + 1 > generator.context_limit:
        episode.stop_reason = "length"  # no room to show the responses: the policy never sees them
        return False
    episode.messages.extend(messages)
    episode.observations.extend(answers)
    episode.append(suffix, False)
    return True


def run_episodes(
    generator: TurnGenerator,
    tasks: Sequence[Mapping[str, Any]] | None = None,
    *,
    env_factory: Callable[[Mapping[str, Any]], Any],
    max_turns: int,
    max_new_tokens: int,
    num_samples: int = 1,
    episodes: list[Episode] | None = None,
    reward_fn: Callable[[Episode], Any] | None = None,
) -> list[Episode]:
    """Roll every episode to its end (see the module docstring); rewards via `reward_fn`."""
    release_freed_memory()  # the last batch's (or training step's) freed tensors: see slca.rollout.memory
    if episodes is None:
        episodes = new_episodes(list(tasks or []), generator.tokenizer, num_samples)
    sessions = [env_factory(episode.task) for episode in episodes]
    live = list(range(len(episodes)))
    for round_index in range(max_turns + 1):
        for i in live:
            if generator.context_limit - len(episodes[i].sequence) <= 0:
                episodes[i].stop_reason = "length"
        live = [i for i in live if episodes[i].stop_reason != "length"]
        shared = generator.any_live(bool(live))
        if shared is False or (shared is None and not live):
            break
        rows = live if shared is None else list(range(len(episodes)))  # equal-size batches across processes
        if not rows:
            continue
        budgets = [max(1, min(max_new_tokens, generator.context_limit - len(episodes[i].sequence))) for i in rows]
        turns = generator.generate([episodes[i] for i in rows], budgets, round_index)
        by_row = dict(zip(rows, turns, strict=True))
        live = [i for i in live if _take_turn(episodes[i], by_row[i], generator, sessions[i], round_index == max_turns)]
    if reward_fn is not None:
        for episode in episodes:
            reward_fn(episode)
    return episodes
