"""Clients that turn chat messages into a model reply: an OpenAI-compatible HTTP endpoint
(`/v1/chat/completions`, e.g. a vLLM server) through httpx, or a local transformers model.

    client = ChatClient(params.simulator.llm)        # EndpointParams
    reply = client([{"role": "user", "content": "..."}])
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """The endpoint did not produce a reply; the message names the URL and the reason."""


class ChatClient:
    """POST /chat/completions with timeouts and retries; returns the first choice's text."""

    def __init__(self, endpoint: Any = None, *, max_tokens: int = 512, backoff_s: float = 0.2) -> None:
        self.base_url = getattr(endpoint, "base_url", "http://127.0.0.1:8000/v1").rstrip("/")
        self.model = getattr(endpoint, "model", "local")
        self.timeout_s = float(getattr(endpoint, "timeout_s", 30.0))
        self.retries = int(getattr(endpoint, "retries", 2))
        self.max_tokens = max_tokens
        self.backoff_s = backoff_s
        key = os.environ.get(getattr(endpoint, "api_key_env", "OPENAI_API_KEY") or "", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        limits = httpx.Limits(max_connections=int(getattr(endpoint, "max_concurrency", 4)) * 2)
        self._http = httpx.Client(timeout=self.timeout_s, headers=headers, limits=limits)

    def __call__(self, messages: list[dict]) -> str:
        body = {"model": self.model, "messages": messages, "temperature": 0.0, "max_tokens": self.max_tokens}
        url = f"{self.base_url}/chat/completions"
        reason = "no attempt made"
        for attempt in range(self.retries + 1):
            try:
                response = self._http.post(url, json=body)
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
                time.sleep(self.backoff_s * (2 ** attempt))
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

        inputs = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                               return_dict=True)
        inputs = {k: v.to(model.device) for k, v in inputs.items()}
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
        return tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    return generate
