"""Chat messages in the Qwen2.5 tool-calling format, shared by SFT, rollouts and the tokenizer corpus.

An assistant tool-calling turn is a message with structured `tool_calls`; the chat template renders
it as `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` blocks. A tool answer is a
`tool` message whose content is the JSON payload (or `{"error": ...}`), rendered inside
`<tool_response>` tags.

    messages = gold_conversation(task)   # system, user, assistant calls, tool answers, summary
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

NO_TOOL_ANSWER = "None of the available tools can help with this request, so I cannot answer it with a tool."


def tool_call_text(name: str, arguments: Mapping[str, Any]) -> str:
    """One `<tool_call>` block exactly as the Qwen2.5 template writes it."""
    payload = json.dumps(dict(arguments), ensure_ascii=False)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {payload}}}\n</tool_call>'


def shortest_numbers(value: Any) -> Any:
    """`value` with every whole float written as an integer (JSON has one number type: 10.0 is 10).

    A call written the way a request states its numbers (`{"base": 10}`) is what schemas typed
    `integer` accept; `10.0` is refused there by strict checkers such as BFCL's.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, Mapping):
        return {key: shortest_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shortest_numbers(item) for item in value]
    return value


def tool_calls_message(calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """An assistant message carrying structured tool calls (content empty), numbers in shortest form."""
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": call["name"], "arguments": shortest_numbers(dict(call.get("arguments") or {}))},
            }
            for call in calls
        ],
    }


def tool_content(ok: bool, content: Any, error: str | None) -> str:
    """The text of a tool message: the JSON payload on success, `{"error": ...}` otherwise."""
    if ok:
        return json.dumps(content, ensure_ascii=False)
    return json.dumps({"error": error or "tool call failed"}, ensure_ascii=False)


def tool_message(name: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "name": name, "content": text}


def gold_conversation(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The full reference dialogue of a task: prompt, gold calls with their real answers, summary."""
    messages: list[dict[str, Any]] = [dict(message) for message in task["messages"]]
    responses = task.get("gold_responses") or []
    for step_index, step in enumerate(task.get("gold_steps") or []):
        if not step:
            continue
        messages.append(tool_calls_message(step))
        step_responses = responses[step_index] if step_index < len(responses) else []
        for call_index, call in enumerate(step):
            payload = step_responses[call_index] if call_index < len(step_responses) else {}
            messages.append(tool_message(call["name"], tool_content(True, payload, None)))
    summary = (task.get("gold_summary") or "").strip()
    if not summary and not task.get("gold_steps"):
        summary = NO_TOOL_ANSWER
    messages.append({"role": "assistant", "content": summary})
    return messages


def prompt_messages(task: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The system + user messages a rollout starts from."""
    return [dict(message) for message in task["messages"]]


def render_prompt(task: Mapping[str, Any], tokenizer: Any) -> str:
    """The prompt text of a task (system + user, tools in the system block, assistant header)."""
    from slca.rollout.chat_format import render

    return render(tokenizer, task["messages"], task.get("tools"), tokenize=False, add_generation_prompt=True)


def gold_turn_tokens(tasks: Sequence[Mapping[str, Any]], tokenizer: Any) -> list[int]:
    """Tokens of every gold tool-call turn: one step's `<tool_call>` blocks as the policy writes them, plus the
    end-of-turn token. A turn budget (`train.max_completion_length`) below the longest cuts those turns short,
    and a cut call is malformed however right its start."""
    lengths = []
    for task in tasks:
        for step in task.get("gold_steps") or []:
            if step:
                text = "\n".join(
                    tool_call_text(call["name"], shortest_numbers(dict(call.get("arguments") or {}))) for call in step
                )
                lengths.append(len(tokenizer(text, add_special_tokens=False)["input_ids"]) + 1)
    return lengths


def budget_shortfall(tasks: Sequence[Mapping[str, Any]], tokenizer: Any, budget: int) -> str | None:
    """One line naming how many gold tool-call turns `budget` tokens cannot hold; None when it holds them all."""
    lengths = gold_turn_tokens(tasks, tokenizer)
    over = sum(length > budget for length in lengths)
    if not over:
        return None
    return (
        f"train.max_completion_length {budget} cuts {over} of {len(lengths)} gold tool-call turns short "
        f"(the longest is {max(lengths)} tokens); raise it to at least {max(lengths)}"
    )
