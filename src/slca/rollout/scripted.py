"""Scripted turn generators: an observant oracle and its corruptions, through the real engine.

The **oracle** does the right thing with what it observed:
- a task that needs no call gets the refusal, no call;
- step k of the gold gets step k's calls, with every argument that came from an earlier response
  (a value equal to a leaf of the recorded earlier responses) read from the *observed* response at
  the same place — so under a simulator it copies the simulated id, as a competent policy would;
- after the last step it writes a faithful summary: the requested facts as the observed
  responses state them (`slca.rewards.facts.observed_facts`), nothing else.

A **corruption** is the oracle with one thing broken (`CORRUPTIONS`); each names the segment it
corrupts, so the reward audit can check that exactly that segment's reward goes down.

    generator = ScriptedTurnGenerator(tokenizer, oracle_turn)
    episodes = run_episodes(generator, tasks, env_factory=..., max_turns=2, max_new_tokens=256)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slca.rewards.facts import (
    fact_tokens,
    leaves,
    observed_facts,
    parse_observation,
    value_at,
)
from slca.rewards.values import loosely_equal
from slca.rollout.chat import NO_TOOL_ANSWER, tool_call_text
from slca.rollout.chat_format import chat_format
from slca.rollout.loop import Episode, Turn, tool_suffix_ids

Policy = Callable[[Episode, int], str]
EMPTY_REPORT = "The request went through, and the tools returned nothing that needs reporting."
ERROR_REPORT = "The tool reported an error, so the request could not be completed."


class ScriptedTurnGenerator:
    """Turns written by `policy(episode, round)` (canonical call text, put in the template's own tags),
    tokenized, ending at the chat template's end-of-turn token."""

    def __init__(self, tokenizer: Any, policy: Policy, context_limit: int = 1 << 30) -> None:
        self.tokenizer, self.policy = tokenizer, policy
        self.format = chat_format(tokenizer)
        self.eos_token_ids = set(self.format.stop_ids)
        self.context_limit = context_limit

    def generate(self, episodes: Sequence[Episode], budgets: Sequence[int], round_index: int) -> list[Turn]:
        turns = []
        for episode, budget in zip(episodes, budgets, strict=True):
            text = self.format.model_text(self.policy(episode, round_index))
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            turns.append(Turn((list(ids) + [self.format.end_of_turn_id])[:budget]))
        return turns

    def tool_suffix(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        return tool_suffix_ids(self.tokenizer, messages)

    def any_live(self, local_live: bool) -> bool | None:
        return None


def _recorded_sources(task: Mapping[str, Any], before_step: int) -> list[tuple[int, tuple, Any]]:
    """(flat call index, path, value) of every leaf of the recorded responses before a step."""
    out: list[tuple[int, tuple, Any]] = []
    flat = 0
    for step_responses in (task.get("gold_responses") or [])[:before_step]:
        for response in step_responses:
            out.extend((flat, path, value) for path, value in leaves(response))
            flat += 1
    return out


def observant_calls(task: Mapping[str, Any], step: int, observations: Sequence[tuple[str, str]]) -> list[dict]:
    """Gold step `step`, with values that came from earlier responses read from the observed ones."""
    sources = _recorded_sources(task, step)
    payloads = [parse_observation(text) for _, text in observations]
    calls = []
    for call in (task.get("gold_steps") or [])[step]:
        arguments = {}
        for key, value in dict(call.get("arguments") or {}).items():
            origin = next(
                ((i, p) for i, p, v in sources if not isinstance(value, bool) and loosely_equal(v, value)), None
            )
            if origin is not None and origin[0] < len(payloads) and payloads[origin[0]] is not None:
                seen = value_at(payloads[origin[0]], origin[1])
                value = seen if seen is not None and not isinstance(seen, Mapping | list) else value
            arguments[key] = value
        calls.append({"name": call["name"], "arguments": arguments})
    return calls


def calls_text(calls: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(tool_call_text(c["name"], c.get("arguments") or {}) for c in calls)


def faithful_summary(episode: Episode) -> str:
    """The requested facts as observed, in one sentence; a plain report when there are none."""
    facts = observed_facts(episode.task, episode.observations)
    if facts:
        return "Here is what I found: " + "; ".join(facts) + "."
    if any(parse_observation(text) is None for _, text in episode.observations):
        return ERROR_REPORT
    return EMPTY_REPORT


def oracle_turn(episode: Episode, round_index: int) -> str:
    gold = episode.task.get("gold_steps") or []
    if not gold:
        return NO_TOOL_ANSWER
    step = len(episode.turns)  # every earlier turn was a tool step (the episode went on)
    if step < len(gold):
        return calls_text(observant_calls(episode.task, step, episode.observations))
    return faithful_summary(episode)


# ---- corruptions -------------------------------------------------------------------------------


def _first_step(episode: Episode) -> bool:
    return not episode.turns and bool(episode.task.get("gold_steps"))


def _offered(task: Mapping[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in task.get("tools") or [] if "function" in tool]


def _with_first_call(episode: Episode, change: Callable[[dict, Mapping[str, Any]], None]) -> str:
    calls = observant_calls(episode.task, 0, episode.observations)
    calls[0] = {"name": calls[0]["name"], "arguments": dict(calls[0]["arguments"])}
    change(calls[0], episode.task)
    return calls_text(calls)


def _wrong_tool(call: dict, task: Mapping[str, Any]) -> None:
    others = [name for name in _offered(task) if name != call["name"]]
    call["name"] = others[0] if others else f"{call['name']}_v2"


def _drop_argument(call: dict, task: Mapping[str, Any]) -> None:
    call["arguments"].pop(min(call["arguments"]))


def _repeat_first_call(episode: Episode) -> str:
    calls = observant_calls(episode.task, 0, episode.observations)
    return calls_text([*calls, calls[0]])


def wrong_value(value: Any) -> Any:
    """A value of the same type that no loose comparison equates with `value`."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, list):
        return [*value, "zz-extra"]
    return f"{value}-X9"


def _change_value(call: dict, task: Mapping[str, Any]) -> None:
    key = min(call["arguments"])
    call["arguments"][key] = wrong_value(call["arguments"][key])


def _sources(episode: Episode) -> set[str]:
    return set(
        fact_tokens(" ".join([*episode.tool_responses, *(m.get("content") or "" for m in episode.task["messages"])]))
    )


def _absent_number(episode: Episode, start: int = 4817) -> str:
    """A number no source states. Fact tokens keep 6 significant digits (2432902008176640000 and one
    more read alike), so the step doubles until the token changes instead of counting up by one."""
    seen, value, step = _sources(episode), start, 1
    while fact_tokens(str(value))[0] in seen:
        value, step = value + step, step * 2
    return str(value)


def _contradict(episode: Episode) -> str:
    facts = observed_facts(episode.task, episode.observations)
    summary = faithful_summary(episode)
    if not facts:
        return summary + f" It came to {_absent_number(episode)} in Zanzibar."
    fact = facts[0]
    numbers = [t for t in fact_tokens(fact) if t[0].isdigit()]
    if numbers:
        replacement = _absent_number(episode, int(float(numbers[0])) + 11)
    else:
        replacement = "Zanzibar" if "zanzibar" not in _sources(episode) else "Kathmandu"
    return "Here is what I found: " + "; ".join([replacement, *facts[1:]]) + "."


@dataclass(frozen=True)
class Corruption:
    """The oracle with one thing broken: `segment` is the one whose reward must go down."""

    name: str
    segment: str  # "tool" | "summary"
    applies: Callable[[Mapping[str, Any]], bool]
    turn: Policy


def _needs_call(task: Mapping[str, Any]) -> bool:
    return bool(task.get("gold_steps"))


def _has_arguments(task: Mapping[str, Any]) -> bool:
    return _needs_call(task) and bool(task["gold_steps"][0][0].get("arguments"))


def _on_first_step(change: Callable[[Episode], str]) -> Policy:
    return lambda episode, r: change(episode) if _first_step(episode) else oracle_turn(episode, r)


def _on_summary(change: Callable[[Episode], str]) -> Policy:
    def turn(episode: Episode, r: int) -> str:
        if len(episode.turns) >= len(episode.task.get("gold_steps") or []):
            return change(episode)
        return oracle_turn(episode, r)

    return turn


CORRUPTIONS: tuple[Corruption, ...] = (
    Corruption("wrong_tool", "tool", _needs_call, _on_first_step(lambda e: _with_first_call(e, _wrong_tool))),
    Corruption(
        "missing_argument", "tool", _has_arguments, _on_first_step(lambda e: _with_first_call(e, _drop_argument))
    ),
    Corruption("wrong_value", "tool", _has_arguments, _on_first_step(lambda e: _with_first_call(e, _change_value))),
    Corruption("extra_call", "tool", _needs_call, _on_first_step(_repeat_first_call)),
    Corruption(
        "no_call_when_needed",
        "tool",
        _needs_call,
        _on_first_step(lambda e: "I checked and everything looks fine for your request."),
    ),
    Corruption(
        "call_when_not_needed",
        "tool",
        lambda t: not _needs_call(t) and bool(_offered(t)),
        lambda e, r: tool_call_text(_offered(e.task)[0], {}) if not e.turns else NO_TOOL_ANSWER,
    ),
    Corruption(
        "vacuous_summary", "summary", _needs_call, _on_summary(lambda e: "Here is what the tool returned for you.")
    ),
    Corruption(
        "unseen_fact_summary",
        "summary",
        _needs_call,
        _on_summary(lambda e: faithful_summary(e) + f" It also lists {_absent_number(e)} for Zanzibar."),
    ),
    Corruption(
        "contradicting_summary",
        "summary",
        lambda t: _needs_call(t) and bool(t.get("reference")),
        _on_summary(_contradict),
    ),
    Corruption("empty_summary", "summary", _needs_call, _on_summary(lambda e: "")),
)


def corruption(name: str) -> Corruption:
    for item in CORRUPTIONS:
        if item.name == name:
            return item
    raise ValueError(f"unknown corruption {name!r}; choose one of {[c.name for c in CORRUPTIONS]}")


def dump_turns(episode: Episode) -> str:
    """The episode's assistant turns, for a readable audit log."""
    return json.dumps(episode.turns, ensure_ascii=False)
