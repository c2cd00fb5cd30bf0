"""Clients that turn chat messages into a model reply: an OpenAI-compatible HTTP endpoint
(`/v1/chat/completions`, e.g. a vLLM server) through httpx, or a local transformers model.

    client = ChatClient(params.simulator.llm)        # EndpointParams
    reply = client([{"role": "user", "content": "..."}])

`post_json` gives every request one total deadline (httpx's own timeouts are per socket operation,
so a server trickling a byte at a time would hold a request forever). `FailureWindow` counts the
outcomes of the last calls to a model, so training can log failure rates and stop when they pass
their budget (`FailureBudgetExceeded`, one line).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections import deque
from typing import Any

import httpx

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
TEMPERATURE = 0.0  # the simulator asks for deterministic answers; part of the cache key


class EndpointError(RuntimeError):
    """The endpoint did not produce a reply; the message names the URL and the reason."""


class FailureBudgetExceeded(EndpointError):
    """More of the last calls to a model failed than its budget allows; the message names the budget key."""


class FailureWindow:
    """Outcomes of the last `window` calls (and of those since the last `step_rate`); thread-safe.

    Once `window` calls were made and more than `max_rate` of them failed, `problem` says so in one
    line and `check` raises it as FailureBudgetExceeded; `what` says what a failure is, `key` names
    the params budget, `hint` what to do.
    """

    def __init__(self, window: int, max_rate: float, *, what: str, key: str, hint: str) -> None:
        self.max_rate = max_rate
        self.what, self.key, self.hint = what, key, hint
        self._recent: deque[bool] = deque(maxlen=window)
        self._step_calls = self._step_failures = 0
        self._lock = threading.Lock()

    def record(self, failed: bool) -> None:
        with self._lock:
            self._recent.append(bool(failed))
            self._step_calls += 1
            self._step_failures += bool(failed)

    def step_rate(self) -> float:
        """Share of the calls since the previous `step_rate` that failed (0 when there were none)."""
        with self._lock:
            rate = self._step_failures / self._step_calls if self._step_calls else 0.0
            self._step_calls = self._step_failures = 0
        return rate

    def problem(self) -> str | None:
        with self._lock:
            calls, failures = len(self._recent), sum(self._recent)
        if calls < (self._recent.maxlen or 0) or failures / calls <= self.max_rate:
            return None
        return (
            f"{self.what} on {failures} of the last {calls} calls ({failures / calls:.0%} > "
            f"{self.key}.max_rate {self.max_rate:.0%}); {self.hint}"
        )

    def check(self) -> None:
        problem = self.problem()
        if problem is not None:
            raise FailureBudgetExceeded(problem)


def deadline_client(
    timeout_s: float, *, headers: dict | None = None, max_connections: int = 8, trust_env: bool = True
) -> httpx.Client:
    """An httpx client for `post_json`: no keep-alive, so every request opens the socket its deadline watches."""
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)
    return httpx.Client(timeout=timeout_s, headers=headers, limits=limits, trust_env=trust_env)


def post_json(
    http: httpx.Client, url: str, body: Any, deadline_s: float, headers: dict | None = None
) -> httpx.Response:
    """POST `body` and read the whole answer within `deadline_s` seconds, or raise httpx.ReadTimeout."""
    cutoff = _Cutoff(time.monotonic() + deadline_s)
    try:
        return http.post(url, json=body, headers=headers, extensions={"trace": cutoff.trace})
    except httpx.HTTPError:
        if cutoff.fired:
            raise httpx.ReadTimeout(f"no complete answer within {deadline_s:g}s") from None
        raise
    finally:
        cutoff.cancel()


class _Cutoff:
    """Shuts a request's socket down at the deadline: a read blocked on it returns at once."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._timer: threading.Timer | None = None

    def trace(self, event: str, info: dict) -> None:  # httpcore's `trace` request extension
        if not event.endswith((".connect_tcp.complete", ".connect_unix_socket.complete")):
            return
        sock = info["return_value"].get_extra_info("socket")
        self._timer = threading.Timer(max(0.0, self.deadline - time.monotonic()), self._fire, (sock,))
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, sock: socket.socket) -> None:
        self.fired = True
        with contextlib.suppress(OSError):  # already closed: the request is over
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class ChatClient:
    """POST /chat/completions with a deadline per request and retries; returns the first choice's text."""

    def __init__(self, endpoint: Any = None, *, max_tokens: int = 512, backoff_s: float = 0.2) -> None:
        self.base_url = getattr(endpoint, "base_url", "http://127.0.0.1:8000/v1").rstrip("/")
        self.model = getattr(endpoint, "model", "local")
        self.timeout_s = float(getattr(endpoint, "timeout_s", 30.0))
        self.retries = int(getattr(endpoint, "retries", 2))
        self.max_tokens = max_tokens
        self.backoff_s = backoff_s
        key = os.environ.get(getattr(endpoint, "api_key_env", "OPENAI_API_KEY") or "", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        connections = int(getattr(endpoint, "max_concurrency", 4)) * 2
        self._http = deadline_client(self.timeout_s, headers=headers, max_connections=connections)

    def __call__(self, messages: list[dict]) -> str:
        body = {"model": self.model, "messages": messages, "temperature": TEMPERATURE, "max_tokens": self.max_tokens}
        url = f"{self.base_url}/chat/completions"
        reason = "no attempt made"
        for attempt in range(self.retries + 1):
            try:
                response = post_json(self._http, url, body, self.timeout_s)
                if response.status_code in RETRYABLE_STATUS:
                    reason = f"HTTP {response.status_code}"
                elif response.status_code >= 400:
                    raise EndpointError(f"{url}: HTTP {response.status_code} {response.text[:200]}")
                else:
                    return _reply_text(response.json(), url)
            except httpx.TimeoutException:
                reason = f"timed out after {self.timeout_s:g}s"
            except httpx.HTTPError as error:
                reason = f"{type(error).__name__}: {error}"
            except ValueError as error:
                reason = f"invalid JSON body ({error})"
            if attempt < self.retries:
                time.sleep(self.backoff_s * (2**attempt))
        raise EndpointError(f"{url}: {reason} (after {self.retries + 1} attempts); check simulator.llm.base_url")

    def close(self) -> None:
        self._http.close()


def _reply_text(payload: Any, url: str) -> str:
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise EndpointError(f"{url}: reply is not a chat completion (no choices[0].message.content)") from None
    return content if isinstance(content, str) else ""


def transformers_generator(model: Any, tokenizer: Any, max_new_tokens: int = 512) -> Any:
    """A `generate(messages) -> str` callable over a local Hugging Face causal LM (greedy)."""

    def generate(messages: list[dict]) -> str:
        import torch

        inputs = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        inputs = {k: v.to(model.device) for k, v in inputs.items()}
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
        return tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)

    return generate
