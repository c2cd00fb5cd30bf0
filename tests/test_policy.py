"""Policy factory: tokenizer control tokens, the compact chat template, tiny model size, determinism."""

from __future__ import annotations

import json

import pytest
import torch
from policy_fixtures import (
    WEATHER_TOOL,
    parallel_task,
    single_task,
    small_params,
    tiny_tasks,
)
from trl.chat_template_utils import (
    get_training_chat_template,
    is_chat_template_prefix_preserving,
    is_chat_template_stop_token_trained,
    supports_tool_calling,
)

from slca.config import Params
from slca.rollout.chat_format import chat_format
from slca.train.policy import (
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    PolicyError,
    build_tiny_model,
    corpus_texts,
    count_parameters,
    load_policy,
    load_tokenizer,
    render_prompt,
    tool_names,
    train_tokenizer,
)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(corpus_texts(tiny_tasks(24)), vocab_size=700, seed=0)


def test_control_tokens_are_single_tokens(tokenizer):
    for token in SPECIAL_TOKENS:
        ids = tokenizer.encode(f"x{token}y", add_special_tokens=False)
        assert tokenizer.convert_ids_to_tokens(ids).count(token) == 1
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.eos_token_id != tokenizer.pad_token_id


def test_encoding_round_trips_a_dialogue(tokenizer):
    text = corpus_texts([parallel_task(1)])[0]
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False)) == text


def test_offered_tool_names_are_single_tokens():
    tasks = tiny_tasks(24)
    assert "get_weather" in tool_names(tasks)
    texts = corpus_texts(tasks)
    plain = train_tokenizer(texts, vocab_size=270, seed=0)  # too few merges to build the name itself
    named = train_tokenizer(texts, vocab_size=270, seed=0, whole_words=tool_names(tasks))
    call = '{"name": "get_weather", "arguments": {"city": "Lima"}}'
    assert "get_weather" not in plain.convert_ids_to_tokens(plain.encode(call, add_special_tokens=False))
    assert "get_weather" in named.convert_ids_to_tokens(named.encode(call, add_special_tokens=False))
    text = corpus_texts([parallel_task(1)])[0]
    assert named.decode(named.encode(text, add_special_tokens=False)) == text


def test_prompt_renders_each_tool_as_one_typed_line(tokenizer):
    prompt = render_prompt(single_task(0), tokenizer)
    assert prompt == (
        "<|im_start|>system\nYou are a helpful assistant that can call tools.\n\nTools:\n"
        "get_weather(city: str) - Current weather in a city.\n"
        "get_time(city: str) - Local time in a city.\n"
        "Call tools with one block per call:\n<tool_call>\n"
        '{"name": <tool>, "arguments": {<arg>: <value>}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\nWhat is the weather in Lima?<|im_end|>\n<|im_start|>assistant\n"
    )
    assert json.dumps(WEATHER_TOOL["function"]["parameters"]) not in prompt


def test_compact_line_types_required_optional_enum_array_and_nested_arguments(tokenizer):
    tool = {
        "type": "function",
        "function": {
            "name": "place_order",
            "description": "Place an order.",
            "parameters": {
                "type": "object",
                "required": ["email", "items"],
                "properties": {
                    "coupon": {"type": "string"},
                    "email": {"type": "string", "format": "email"},
                    "express": {"type": "boolean"},
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["product_id"],
                            "properties": {"product_id": {"type": "string"}, "quantity": {"type": "integer"}},
                        },
                    },
                    "method": {"type": "string", "enum": ["standard", "express"]},
                    "tip": {"type": "number"},
                    "tags": {"type": "array"},
                },
            },
        },
    }
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tools=[tool], tokenize=False)
    assert (
        "place_order(email: email, items: list[{product_id: str, quantity?: int}], coupon?: str, express?: bool, "
        "method?: standard|express, tip?: num, tags?: list[any]) - Place an order.\n"
    ) in prompt


def test_tool_call_and_response_blocks_like_qwen2_5(tokenizer):
    text = corpus_texts([single_task(0)])[0]
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n'
        "</tool_call><|im_end|>\n"
    ) in text
    assert (
        '<|im_start|>user\n<tool_response>\n{"city": "Lima", "temp_c": 14, "sky": "clear"}\n</tool_response><|im_end|>'
        in text
    )
    assert text.endswith("<|im_start|>assistant\nIt is 14 C and clear in Lima.<|im_end|>\n")


def test_compact_prompt_is_shorter_than_json_schemas(tokenizer):
    from trl.chat_template_utils import qwen2_5_chat_template

    task = single_task(0)
    compact = render_prompt(task, tokenizer)
    schemas = tokenizer.apply_chat_template(
        task["messages"],
        tools=task["tools"],
        chat_template=qwen2_5_chat_template,
        tokenize=False,
        add_generation_prompt=True,
    )
    assert len(tokenizer.encode(compact)) < 0.6 * len(tokenizer.encode(schemas))


def test_trl_tool_machinery_accepts_the_tokenizer(tokenizer):
    assert supports_tool_calling(tokenizer)
    assert is_chat_template_prefix_preserving(tokenizer)
    # the template carries its own generation markers: TRL needs no patch, and <|im_end|> is trained
    assert get_training_chat_template(tokenizer) is None
    assert "{%- generation %}" in tokenizer.chat_template
    assert is_chat_template_stop_token_trained(tokenizer, tokenizer.chat_template)
    fmt = chat_format(tokenizer)
    assert (fmt.end_of_turn, fmt.call_open, fmt.call_close) == ("<|im_end|>", "<tool_call>", "</tool_call>")
    assert fmt.training_template == tokenizer.chat_template


def test_default_tiny_model_has_1_to_5_million_parameters():
    params = Params()
    texts = corpus_texts(tiny_tasks(8))
    tokenizer = train_tokenizer(texts, vocab_size=params.policy.tiny.vocab_size, seed=0)
    model = build_tiny_model(params.policy.tiny, tokenizer, seed=0)
    # a small corpus yields fewer merges than vocab_size; pad to the configured size for the bound
    full_vocab_extra = (params.policy.tiny.vocab_size - len(tokenizer)) * params.policy.tiny.hidden_size
    assert 1_000_000 <= count_parameters(model) + max(full_vocab_extra, 0) <= 5_000_000
    assert model.config.model_type == "qwen2"
    assert model.config.vocab_size == len(tokenizer)


def test_tokenizer_and_model_are_deterministic_by_seed(tokenizer):
    again = train_tokenizer(corpus_texts(tiny_tasks(24)), vocab_size=700, seed=0)
    assert again.get_vocab() == tokenizer.get_vocab()
    tiny = small_params().policy.tiny
    first, second = build_tiny_model(tiny, tokenizer, seed=3), build_tiny_model(tiny, tokenizer, seed=3)
    other = build_tiny_model(tiny, tokenizer, seed=4)
    weight = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(first.state_dict()[weight], second.state_dict()[weight])
    assert not torch.equal(first.state_dict()[weight], other.state_dict()[weight])


def test_load_policy_round_trips_a_saved_model(tokenizer, tmp_path):
    params = small_params()
    model, _ = load_policy(None, params, tokenizer=tokenizer)
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    loaded, loaded_tokenizer = load_policy(tmp_path / "m", params)
    # the reloaded tokenizer keeps the compact template exactly
    assert loaded_tokenizer.chat_template == CHAT_TEMPLATE and loaded_tokenizer.eos_token == "<|im_end|>"
    text = render_prompt(single_task(2), loaded_tokenizer)
    assert loaded_tokenizer.encode(text) == tokenizer.encode(text)
    ids = torch.tensor([tokenizer.encode(text)])
    assert torch.allclose(model(ids).logits, loaded(ids).logits, atol=1e-5)


def test_a_saved_tokenizer_keeps_its_own_pre_tokenizer_under_a_qwen2_config(tmp_path):
    # transformers rebuilds Qwen2's pre-tokenizer for a qwen2 config; load_tokenizer puts the saved one back
    from transformers import AutoTokenizer

    tasks = tiny_tasks(24)
    words = train_tokenizer(
        corpus_texts(tasks), vocab_size=700, seed=0, whole_words=tool_names(tasks), pretokenizer="wordsp"
    )
    model, _ = load_policy(None, small_params(), tokenizer=words)
    model.save_pretrained(tmp_path / "m")
    words.save_pretrained(tmp_path / "m")
    text = render_prompt(single_task(2), words)
    assert AutoTokenizer.from_pretrained(tmp_path / "m")(text)["input_ids"] != words(text)["input_ids"]
    assert load_tokenizer(tmp_path / "m")(text)["input_ids"] == words(text)["input_ids"]


def test_load_policy_names_a_missing_path(tmp_path):
    with pytest.raises(PolicyError, match="does not exist"):
        load_policy(tmp_path / "nope", small_params())


def test_lora_wraps_the_tiny_model(tokenizer):
    params = small_params().model_copy(
        update={
            "policy": small_params().policy.model_copy(
                update={"lora": small_params().policy.lora.model_copy(update={"enabled": True, "r": 4})}
            )
        }
    )
    model, _ = load_policy(None, params, tokenizer=tokenizer)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert 0 < trainable < count_parameters(model) / 4


def test_words_pretokenizer_survives_a_reload_and_copies_values_token_for_token(tmp_path):
    words = train_tokenizer(corpus_texts(tiny_tasks(24)), vocab_size=700, seed=0, pretokenizer="words")
    params = small_params()
    model, _ = load_policy(None, params, tokenizer=words)
    model.save_pretrained(tmp_path / "m")
    words.save_pretrained(tmp_path / "m")
    _, loaded = load_policy(tmp_path / "m", params)
    text = (
        render_prompt(parallel_task(1), words) + '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}'
    )
    # transformers would rebuild Qwen2's split for a qwen2 config; the saved split must come back
    assert loaded.encode(text) == words.encode(text)
    request, call = words.encode("Weather in Lima?"), words.encode('{"city": "Lima"}')
    lima = words.encode("Lima")
    assert any(request[i : i + len(lima)] == lima for i in range(len(request)))
    assert any(call[i : i + len(lima)] == lima for i in range(len(call)))


def test_unknown_pretokenizer_is_named():
    with pytest.raises(PolicyError, match="pretokenizer"):
        train_tokenizer(corpus_texts(tiny_tasks(4)), vocab_size=700, seed=0, pretokenizer="bytes")


def test_the_embedded_policy_takes_a_template_with_its_control_tokens_only(tmp_path):
    from slca.train.policy import embedded_template, tokenizer_for_tasks

    tasks = tiny_tasks(12)
    params = small_params()
    qwen = params.model_copy(update={"policy": params.policy.model_copy(update={"chat_template": "qwen2_5"})})
    schemas = tokenizer_for_tasks(tasks, qwen)
    assert "<tools>\n" + json.dumps(WEATHER_TOOL) in render_prompt(single_task(0), schemas)  # JSON, as before
    assert embedded_template(params) == CHAT_TEMPLATE
    gemma = params.model_copy(update={"policy": params.policy.model_copy(update={"chat_template": "gemma3_tools"})})
    with pytest.raises(PolicyError, match="'gemma3_tools' cannot be the embedded policy's template"):
        tokenizer_for_tasks(tasks, gemma)
