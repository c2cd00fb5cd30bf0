"""The `llm` backend over a local transformers model (a tiny random Qwen2 built from a config, with
a character-level tokenizer): the real generate path runs, its untrained output is unparsable, and
the backend falls back to a schema-conforming response."""

from __future__ import annotations

import pytest

from slca.simulator import SimulatorSession
from slca.simulator.cache import ResponseCache
from slca.simulator.endpoint import transformers_generator
from slca.simulator.llm import LLMBackend
from slca.simulator.specs import toolset
from slca.tools import tool_map

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_model_and_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    symbols = ["<unk>", "<|im_start|>", "<|im_end|>"] + [chr(c) for c in range(32, 127)] + ["\n"]
    core = Tokenizer(models.WordLevel({s: i for i, s in enumerate(symbols)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="<unk>", eos_token="<|im_end|>", pad_token="<unk>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    config = Qwen2Config(
        vocab_size=len(symbols),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
    )
    return Qwen2ForCausalLM(config), tokenizer


@pytest.mark.slow
def test_local_transformers_model_generates_and_falls_back():
    pytest.importorskip("transformers")
    model, tokenizer = tiny_model_and_tokenizer()
    generate = transformers_generator(model, tokenizer, max_new_tokens=6)
    backend = LLMBackend(generate=generate, cache=ResponseCache(":memory:"))
    tools = [tool_map()["get_current_weather"]]
    result = SimulatorSession(tools, backend, knobs={}).call(
        '{"name": "get_current_weather", "arguments": {"city": "Lima"}}'
    )
    assert isinstance(generate([{"role": "user", "content": "hi"}]), str)
    assert result.ok and result.source == "fallback" and backend.stats["unparsable"] == 1
    assert toolset(tools)["get_current_weather"].response_errors(result.content) == []
    assert result.content["city"] == "Lima"
