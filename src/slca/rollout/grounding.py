"""Grounded training simulation: a gold call gets the task's recorded response.

Under the schema (or llm) simulator every response is synthesised, so a later step's gold
arguments — the `product_id` a `search_products` response returned in the real world — can never
be reproduced by a policy that copies them from what it observed, and the summary's reference
facts never appear in what it observed. Grounding fixes both: in training, a call that matches
one of the task's recorded gold calls (same tool, same argument keys, loosely equal values — the
execution reward's own equality) is answered with the response recorded for it at synthesis
time (`gold_responses`, computed by the real executors). Every other call goes through the
configured simulator session unchanged: validated, then synthesised.

So a policy that does the right thing with what it observed sees one consistent world and can
reach R_tool = 1 under the training simulator, and the judge's requested facts are in its
observations.

    session = GroundedSession(task, SimulatorSession(task["tools"], "schema", params))
    session.call('{"name": "get_current_weather", "arguments": {"city": "Lima"}}')  # recorded
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slca.rewards.parsing import parse_call_body
from slca.rewards.values import calls_match
from slca.rollout.chat import tool_content


class RecordedResult:
    """A recorded gold response, shaped like a simulator ToolResult."""

    ok = True
    error = None
    error_class = None
    backend = "recorded"

    def __init__(self, name: str, content: Any) -> None:
        self.name, self.content = name, content

    def to_message(self) -> str:
        return tool_content(True, self.content, None)


class GroundedSession:
    """Recorded responses for the task's gold calls, the wrapped session for everything else."""

    def __init__(self, task: Mapping[str, Any], inner: Any) -> None:
        self.inner = inner
        self.recorded: list[tuple[dict[str, Any], Any]] = []
        responses = task.get("gold_responses") or []
        for step, step_responses in zip(task.get("gold_steps") or [], responses, strict=False):
            for call, response in zip(step, step_responses, strict=False):
                self.recorded.append((dict(call), response))
        self.history: list[tuple[Any, Any]] = []

    def call(self, call: Any) -> Any:
        parsed = parse_call_body(call) if isinstance(call, str) else call
        if isinstance(parsed, Mapping):
            for gold, response in self.recorded:
                if calls_match(gold, parsed):
                    result = RecordedResult(str(gold["name"]), response)
                    self.history.append((call, result))
                    return result
        result = self.inner.call(call)
        self.history.append((call, result))
        return result
