"""The policy's chat format read from its own template: end of turn, stop set, call tags, refusals.

Toy tokenizers (trained on a few tasks in seconds) stand in for real ones: an end token that is not
the template's end of turn, a template that cannot render tools, one that writes calls in other
tags, one that never trains its end of turn, and a named template installed on a tokenizer that
lacks its tokens.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trl.chat_template_utils as trl_templates
import yaml
from grpo_fixtures import make_policy, small_raw, synthetic_tasks, write_tasks
from policy_fixtures import single_task

from slca.config import Params, TinyModelParams
from slca.rewards.parsing import parse_tool_calls
from slca.rollout import eval_env
from slca.rollout.chat import gold_conversation
from slca.rollout.chat_format import (
    CALL_CLOSE,
    CALL_OPEN,
    ChatFormatError,
    apply_stop_ids,
    chat_format,
    install_chat_template,
    named_templates,
)
from slca.rollout.loop import HFTurnGenerator, run_episodes, tool_suffix_ids
from slca.train.policy import (
    build_tiny_model,
    corpus_texts,
    load_policy,
    train_tokenizer,
)

REPO = Path(__file__).resolve().parents[1]
TINY = TinyModelParams(
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=64,
    vocab_size=700,
    max_position_embeddings=2048,
)


def toy_tokenizer():
    """A fresh embedded-style tokenizer (Qwen2.5 template, `<|im_end|>` end token)."""
    return train_tokenizer(corpus_texts([single_task(i) for i in range(10)]), 700, 0)


def rendered_call_turn(tokenizer, task) -> list[int]:
    """Token ids of the gold call turn as the template writes it, up to and including its end of turn."""
    fmt = chat_format(tokenizer)
    conversation = gold_conversation(task)
    prompt = tokenizer.apply_chat_template(
        conversation[:2], tools=task["tools"], tokenize=True, return_dict=False, add_generation_prompt=True
    )
    full = tokenizer.apply_chat_template(conversation[:3], tools=task["tools"], tokenize=True, return_dict=False)
    assert full[: len(prompt)] == prompt
    turn = full[len(prompt) :]
    return turn[: turn.index(fmt.end_of_turn_id) + 1]


def test_embedded_template_ends_turns_at_im_end_and_writes_canonical_calls():
    tokenizer = toy_tokenizer()
    fmt = chat_format(tokenizer)
    assert fmt.end_of_turn == "<|im_end|>"
    assert fmt.stop_ids == {tokenizer.convert_tokens_to_ids("<|im_end|>")}
    assert (fmt.call_open, fmt.call_close) == (CALL_OPEN, CALL_CLOSE)
    assert "{%- generation %}" in fmt.training_template


def test_stop_set_is_the_union_when_the_end_token_is_not_the_end_of_turn():
    tokenizer = toy_tokenizer()
    tokenizer.eos_token = "<|endoftext|>"  # as a base checkpoint's tokenizer: its end token is not the turn's
    model = build_tiny_model(TINY, tokenizer, 0)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_start|>")
    fmt = chat_format(tokenizer, model)
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert fmt.end_of_turn_id == end_of_turn != tokenizer.eos_token_id
    assert fmt.stop_ids == {end_of_turn, tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_start|>")}
    apply_stop_ids(model, fmt)  # what TRL reads for its rollouts
    assert set(model.generation_config.eos_token_id) == fmt.stop_ids
    # the tool suffix starts right after the end of turn (the template's newline belongs to it)
    suffix = tool_suffix_ids(tokenizer, [{"role": "tool", "name": "get_weather", "content": "{}"}])
    assert tokenizer.decode(suffix).startswith("\n<|im_start|>user\n<tool_response>")

    # a model that writes a call then the end of turn: the episode ends its turn there, not at the cap
    task = single_task(0)
    call_turn = rendered_call_turn(tokenizer, task)
    script = iter(call_turn + [end_of_turn] * 200)

    def forward_hook(module, inputs, output):
        next_token = next(script)
        logits = output.logits.clone()
        logits[:, -1, :] = -1e4
        logits[:, -1, next_token] = 1e4
        output.logits = logits
        return output

    handle = model.register_forward_hook(forward_hook)
    try:
        episode = run_episodes(
            HFTurnGenerator(model, tokenizer), [task], env_factory=eval_env(Params()), max_turns=0, max_new_tokens=64
        )[0]
    finally:
        handle.remove()
    assert episode.completion_ids[len(call_turn) - 1] == end_of_turn
    assert episode.stop_reason == "max_turns"  # a closed call and an ended turn in the last round, not "length"
    assert parse_tool_calls(episode.turns[0]).calls == task["gold_steps"][0]


def test_a_template_that_cannot_render_tools_is_refused_in_one_line():
    tokenizer = toy_tokenizer()
    tokenizer.chat_template = trl_templates.gemma3_chat_template
    with pytest.raises(ChatFormatError) as error:
        chat_format(tokenizer)
    message = str(error.value)
    assert "\n" not in message and "does not render the offered tools" in message
    assert "policy.chat_template" in message and "gemma3_tools" in message


def test_a_missing_template_is_refused_not_substituted(tmp_path):
    tokenizer = toy_tokenizer()
    tokenizer.chat_template = None
    with pytest.raises(ChatFormatError, match="is missing"):
        chat_format(tokenizer)
    folder = make_policy(tmp_path / "policy", [single_task(i) for i in range(4)])
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(ChatFormatError, match="is missing"):
        load_policy(folder, Params())


UNTRAINED_STOP = (
    "{%- for m in messages %}{%- if m.role == 'assistant' %}<|im_start|>assistant\n{% generation %}"
    "{{ m.content }}{% for tc in m.tool_calls or [] %}<tool_call>\n"
    "{{ {'name': tc.function.name, 'arguments': tc.function.arguments} | tojson }}\n</tool_call>{% endfor %}"
    "{% endgeneration %}<|im_end|>\n"
    "{%- elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}{% if tools and loop.first %}{% for t in tools %}"
    "{{ t | tojson }}{% endfor %}{% endif %}<|im_end|>\n{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def test_a_template_whose_end_of_turn_is_not_trained_is_refused():
    tokenizer = toy_tokenizer()
    tokenizer.chat_template = UNTRAINED_STOP  # <|im_end|> after {% endgeneration %}: SFT never teaches stopping
    with pytest.raises(ChatFormatError, match="end-of-turn token outside the trained assistant span"):
        chat_format(tokenizer)
    tokenizer.chat_template = UNTRAINED_STOP.replace("{% endgeneration %}<|im_end|>", "<|im_end|>{% endgeneration %}")
    assert chat_format(tokenizer).end_of_turn == "<|im_end|>"


def test_calls_in_the_templates_own_tags_are_parsed_and_written_back():
    tokenizer = toy_tokenizer()
    tokenizer.add_tokens(["<function_call>", "</function_call>"])
    tokenizer.chat_template = trl_templates.qwen2_5_training_chat_template.replace(
        "<tool_call>", "<function_call>"
    ).replace("</tool_call>", "</function_call>")
    fmt = chat_format(tokenizer)
    assert (fmt.call_open, fmt.call_close) == ("<function_call>", "</function_call>")
    task = single_task(1)
    text = fmt.turn_text(tokenizer, rendered_call_turn(tokenizer, task))
    assert text.startswith(CALL_OPEN) and "<function_call>" not in text
    assert parse_tool_calls(text).calls == task["gold_steps"][0]
    assert fmt.model_text(text).startswith("<function_call>")


@pytest.mark.parametrize("name", sorted(named_templates()))
def test_installing_a_named_template_adds_its_tokens_and_resizes(name):
    tokenizer = train_tokenizer(corpus_texts([single_task(i) for i in range(10)]), 700, 0)
    tokenizer.chat_template = None
    model = build_tiny_model(TINY, tokenizer, 0)
    rows, before = model.get_input_embeddings().weight.shape[0], set(tokenizer.get_vocab())
    added = install_chat_template(model, tokenizer, name)
    spec = named_templates()[name]
    assert added == [token for token in spec.special_tokens if token not in before]
    if name == "gemma3_tools":  # the toy vocabulary has Qwen's control tokens, not Gemma's
        assert added == ["<start_of_turn>", "<end_of_turn>"]
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer) >= rows
    assert tokenizer.eos_token == spec.end_of_turn
    fmt = chat_format(tokenizer, model)
    assert fmt.end_of_turn == spec.end_of_turn
    # the gold calls written by the template decode back to the same calls
    task = single_task(2)
    assert (
        parse_tool_calls(fmt.turn_text(tokenizer, rendered_call_turn(tokenizer, task))).calls == task["gold_steps"][0]
    )
    assert install_chat_template(model, tokenizer, name) == []  # idempotent: a saved policy reloads the same


def test_slca_train_on_a_policy_that_cannot_render_tools_exits_with_one_line(tmp_path):
    tasks = synthetic_tasks(4)
    write_tasks(tmp_path, tasks)
    folder = make_policy(tmp_path / "sft", tasks)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "chat_template.jinja").write_text(trl_templates.gemma3_chat_template)
    raw = small_raw(tmp_path, max_steps=1)
    raw["project"] = {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("slca")),
            "train",
            "--params",
            str(tmp_path / "params.yaml"),
            "--estimator",
            "slca",
            "--seed",
            "0",
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "does not render the offered tools" in lines[0], result.stderr[-2000:]


def test_lora_sft_through_an_installed_template_that_adds_tokens(tmp_path):
    """A base checkpoint without a template, LoRA on, `policy.chat_template` adding Gemma's turn tokens:
    SFT trains (TRL's fused LM head and PEFT agree) and saves a merged model that loads by itself."""
    from slca.train.sft import save_atomically, train_sft

    tasks = [single_task(i) for i in range(6)]
    tokenizer = toy_tokenizer()
    tokenizer.chat_template = None
    build_tiny_model(TINY, tokenizer, 0).save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    params = Params.model_validate(
        {
            "policy": {
                "model_path": str(tmp_path / "base"),
                "chat_template": "gemma3_tools",
                "lora": {"enabled": True},
            },
            "sft": {"max_steps": 2, "n_examples": 4, "threads": 1},
        }
    )
    model, trained_tokenizer, metrics = train_sft(params, tasks)
    assert metrics["sft_steps"] == 2
    save_atomically(model, trained_tokenizer, tmp_path / "sft", metrics)
    assert not (tmp_path / "sft" / "adapter_config.json").exists()
    reloaded, reloaded_tokenizer = load_policy(
        tmp_path / "sft", Params.model_validate({"policy": {"model_path": None, "chat_template": "gemma3_tools"}})
    )
    assert chat_format(reloaded_tokenizer, reloaded).end_of_turn == "<end_of_turn>"
    assert reloaded.get_input_embeddings().weight.shape[0] == len(reloaded_tokenizer)


def test_gold_calls_write_whole_numbers_as_integers():
    """A gold call's 120.0 is written 120 (what an `integer` schema accepts), 1.5 and flags unchanged."""
    task = {
        "messages": [{"role": "user", "content": "Convert 120 EUR, 1.5 miles"}],
        "gold_steps": [
            [{"name": "convert", "arguments": {"amount": 120.0, "rate": 1.5, "round": True, "xs": [2.0, 2.5]}}]
        ],
        "gold_responses": [[{"amount": 120.0}]],
        "gold_summary": "done",
    }
    call = gold_conversation(task)[1]["tool_calls"][0]["function"]["arguments"]
    assert json.dumps(call) == '{"amount": 120, "rate": 1.5, "round": true, "xs": [2, 2.5]}'
    assert type(call["amount"]) is int and task["gold_steps"][0][0]["arguments"]["amount"] == 120.0  # task untouched
