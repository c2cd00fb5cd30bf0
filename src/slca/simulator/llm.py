"""The `llm` backend: a model prompted as an API server writes the tool response.

Prompt: "You are an API SERVER, NOT an AI assistant", the tool definition (parameters and response
schema), a few-shot example synthesized from the schema, the records the call refers to, and the
incoming request; the model must answer only `<tool_response>{json}</tool_response>`. The reply is
repaired (fences, missing tags, trailing commas, Python literals), checked against the response
schema, and replaced by schema synthesis when it fails. Responses are cached in SQLite by
(base URL, model, prompt version, tool schema, canonical arguments, context), and a cached response
is served only while it still conforms to the response schema; requests are bounded by a semaphore.
Every request's outcome goes into `fallbacks` (a FailureWindow the trainer logs as
`simulator/fallback_rate` and checks against `simulator.llm_fallback_budget`).

    backend = LLMBackend(params.simulator)                      # OpenAI-compatible endpoint (vLLM)
    backend = LLMBackend(generate=lambda messages: "<tool_response>{...}</tool_response>")  # local
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from slca.config import FailureBudget
from slca.simulator.cache import ResponseCache, cache_key
from slca.simulator.endpoint import (
    TEMPERATURE,
    ChatClient,
    EndpointError,
    FailureWindow,
)
from slca.simulator.parsing import canonical_json, loads_capped
from slca.simulator.registry import register
from slca.simulator.response import synthesize_response
from slca.simulator.specs import ToolSpec
from slca.simulator.state import EpisodeState
from slca.simulator.synth import synthesize
from slca.simulator.types import Knobs, ToolResult
from slca.simulator.validation import check_arguments

Generate = Callable[[list[dict]], str]
SYSTEM_PROMPT = (
    "You are an API SERVER, NOT an AI assistant. You receive one request for the tool defined below "
    "and reply with the response body the real API would return.\n"
    "Rules:\n"
    "- Output only <tool_response>{json}</tool_response>: no prose, no Markdown, no explanation.\n"
    "- The JSON must conform exactly to the response schema: every required field, the right types, "
    "enum values only, no extra fields.\n"
    "- Echo identifiers and argument values into fields of the same name; keep every value realistic "
    "and consistent with the request and with the known records.\n\n"
    "Tool definition:\n{tool}"
)
# part of every cache key: bump the tag when build_messages changes shape; the prompt text counts itself
PROMPT_VERSION = "api-server-1:" + hashlib.sha256(SYSTEM_PROMPT.encode("utf-8")).hexdigest()[:12]
MAX_REPLY_CHARS = 50000
_TAGGED = re.compile(r"<tool_response>(.*?)(?:</tool_response>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z]*")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_PY_LITERALS = {r"\bTrue\b": "true", r"\bFalse\b": "false", r"\bNone\b": "null"}


def parse_tool_response(text: Any) -> dict | None:
    """The JSON object in a model reply, repaired where that is unambiguous; None if there is none."""
    if not isinstance(text, str):
        return None
    text = text[:MAX_REPLY_CHARS]
    match = _TAGGED.search(text)
    body = _FENCE.sub("", match.group(1) if match else text)
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end < start:
        return None
    candidate = body[start : end + 1]
    for attempt in (candidate, repair_json(candidate)):
        value, problem = loads_capped(attempt, MAX_REPLY_CHARS, 64)
        if problem is None and isinstance(value, dict):
            return value
    return None


def repair_json(text: str) -> str:
    """Fix the usual near-JSON of model output: trailing commas, Python literals, single quotes."""
    text = _TRAILING_COMMA.sub(r"\1", text)
    for pattern, replacement in _PY_LITERALS.items():
        text = re.sub(pattern, replacement, text)
    if '"' not in text:
        text = text.replace("'", '"')
    return text


def few_shot(spec: ToolSpec, knobs: Knobs) -> tuple[dict, dict]:
    """An example request and response for this tool, synthesized from its own schemas."""
    arguments = synthesize(spec.parameters, random.Random(f"example|{spec.name}"), {}, knobs)
    arguments = arguments if isinstance(arguments, dict) else {}
    response = synthesize_response(spec, arguments, EpisodeState(seed=12345), knobs)
    return arguments, response


def build_messages(spec: ToolSpec, arguments: dict, known: dict, knobs: Knobs) -> list[dict]:
    """Chat messages asking the model, as an API server, for this call's response."""
    example_args, example_response = few_shot(spec, knobs)
    tool = json.dumps(spec.as_schema(), ensure_ascii=False)
    request = {"name": spec.name, "arguments": arguments}
    records = f"Known records:\n{json.dumps(known, ensure_ascii=False)}\n\n" if known else ""
    return [
        {"role": "system", "content": SYSTEM_PROMPT.replace("{tool}", tool)},
        {"role": "user", "content": "Incoming request:\n" + json.dumps({"name": spec.name, "arguments": example_args})},
        {"role": "assistant", "content": f"<tool_response>{json.dumps(example_response)}</tool_response>"},
        {"role": "user", "content": f"{records}Incoming request:\n{json.dumps(request, ensure_ascii=False)}"},
    ]


@register("llm")
class LLMBackend:
    """Validate, then ask the model (cache first); fall back to schema synthesis on any failure."""

    def __init__(
        self,
        params: Any = None,
        *,
        generate: Generate | None = None,
        cache: ResponseCache | str | None = None,
        model: str | None = None,
    ) -> None:
        endpoint = getattr(params, "llm", None)
        self.model = model or (endpoint.model if endpoint is not None else "local")
        self.base_url = endpoint.base_url if endpoint is not None and generate is None else "local"
        max_tokens = getattr(params, "llm_max_tokens", 512)
        self.max_tokens = max_tokens
        self.generate: Generate = generate or ChatClient(endpoint, max_tokens=max_tokens)
        if cache is None:
            cache = getattr(params, "cache_path", None) or ":memory:"
        self.cache = cache if isinstance(cache, ResponseCache) else ResponseCache(cache)
        self.max_concurrency = endpoint.max_concurrency if endpoint is not None else 4
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        self.stats: Counter[str] = Counter()
        budget = getattr(params, "llm_fallback_budget", None) or FailureBudget()
        self.fallbacks = FailureWindow(
            budget.window,
            budget.max_rate,
            what="the llm simulator fell back to schema synthesis",
            key="simulator.llm_fallback_budget",
            hint=f"check that {self.base_url} serves model {self.model!r} (simulator.llm) and answers in time",
        )

    def respond(self, spec: ToolSpec, arguments: dict, state: EpisodeState, knobs: Knobs) -> ToolResult:
        arguments, problem = check_arguments(spec, arguments, knobs)
        if problem is not None:
            return problem
        known = state.hints_for(arguments) if knobs.track_writes else {}
        messages = build_messages(spec, arguments, known, knobs)
        key = cache_key(
            base_url=self.base_url,
            model=self.model,
            prompt_version=PROMPT_VERSION,
            tool_schema=spec.as_schema(),
            arguments=arguments,
            context=canonical_json(known) if known else "",
            request={"messages": messages, "max_tokens": self.max_tokens, "temperature": TEMPERATURE},
        )
        content, source = self._cached(spec, key), "cache"
        if content is None:
            content, source = self._ask(spec, messages)
            self.fallbacks.record(source == "fallback")
            if source == "llm":
                self.cache.put(key, spec.name, content)
        if content is None:
            content, source = synthesize_response(spec, arguments, state, knobs), "fallback"
        self.stats[source] += 1
        if knobs.track_writes:
            state.remember(spec.name, content, spec.writes)
        return ToolResult(True, content, None, None, spec.name, source)

    def _cached(self, spec: ToolSpec, key: str) -> dict | None:
        """The cached response, unless it no longer conforms to the response schema."""
        content = self.cache.get(key)
        if content is not None and spec.response_errors(content):
            self.stats["invalid_cache"] += 1
            return None
        return content

    def _ask(self, spec: ToolSpec, messages: list[dict]) -> tuple[dict | None, str]:
        try:
            with self._slots:
                reply = self.generate(messages)
        except EndpointError:
            self.stats["endpoint_error"] += 1
            return None, "fallback"
        except Exception:  # noqa: BLE001 - a local model callable failing must not end the rollout
            self.stats["generate_error"] += 1
            return None, "fallback"
        content = parse_tool_response(reply)
        if content is None:
            self.stats["unparsable"] += 1
            return None, "fallback"
        if spec.response_errors(content):
            self.stats["nonconforming"] += 1
            return None, "fallback"
        return content, "llm"

    def respond_many(self, jobs: list[tuple[ToolSpec, dict, EpisodeState, Knobs]]) -> list[ToolResult]:
        """Answer independent calls concurrently (at most max_concurrency requests in flight)."""
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(lambda job: self.respond(*job), jobs))
