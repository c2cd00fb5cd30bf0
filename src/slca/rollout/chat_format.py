"""A policy's chat format, read from its own chat template: prompts, end of turn, tool-call syntax.

A policy is a model *and its chat template*. Everything the project renders (SFT dialogues, RL and
evaluation prompts, tool messages, BFCL and τ² chats) goes through `tokenizer.apply_chat_template`;
this module reads from that template the three things the rest of the code needs, once per
tokenizer, and refuses a template that cannot provide them — never a silent substitute:

- **tools rendered**: the offered schemas reach the prompt, and a user → assistant call → tool
  exchange renders (TRL's `supports_tool_calling`);
- **end of turn**: the added token that closes an assistant turn. Generation stops at the union of
  it, the tokenizer's end token and the generation config's end tokens (`stop_ids`), the same set
  in SFT, RL (TRL reads `model.generation_config.eos_token_id`, which `apply_stop_ids` sets) and
  evaluation; SFT must train it (`{% generation %}` markers around it: TRL's
  `is_chat_template_stop_token_trained`);
- **call syntax**: the tags the template writes around a `{"name", "arguments"}` JSON call. Turns
  are decoded to the canonical `<tool_call>JSON</tool_call>` text (`turn_text`) that rewards, BFCL
  and τ² parse, and canonical text is written back in the model's own tags (`model_text`).

`install_chat_template(model, tokenizer, name)` gives a model a named template (`policy.chat_template`),
as TRL's `clone_chat_template` does: adds its turn tokens, sets the end token, resizes the embeddings; call
and response tags the vocabulary lacks stay ordinary text, so a model can learn to write them.

    fmt = chat_format(tokenizer, model)       # ChatFormatError (one line) when the template does not fit
    ids = generate(..., eos_token_id=sorted(fmt.stop_ids))
    text = fmt.turn_text(tokenizer, ids)      # '<tool_call>\\n{"name": ...}\\n</tool_call>'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "templates"
_SENTINEL_TOOL = "probe_tool_q7k2"
_SENTINEL_KEY, _SENTINEL_VALUE = "probe_key_m3x9", "probe_value_z5w1"
_SENTINEL_REPLY = "probe_reply_h4v8"
_CACHE_ATTR = "_slca_chat_format"


class ChatFormatError(ValueError):
    """A chat template that cannot render tools, end a turn or write a call; the message says what to set."""


@dataclass(frozen=True)
class TemplateSpec:
    """A template `policy.chat_template` can install: its text, the tokens it needs, its end of turn."""

    text: str
    special_tokens: tuple[str, ...]
    plain_tokens: tuple[str, ...]
    end_of_turn: str


def _trl_template(name: str) -> str:
    import trl.chat_template_utils as trl_templates

    return getattr(trl_templates, f"{name}_chat_template")


def named_templates() -> dict[str, TemplateSpec]:
    """Templates a model can be given by name: TRL's Qwen2.5, the project's compact one (the embedded
    policy's: Qwen2.5 turns, one line per tool) and the project's Gemma-3 tool template."""
    tags = (CALL_OPEN, CALL_CLOSE, "<tool_response>", "</tool_response>")
    return {
        "qwen2_5": TemplateSpec(_trl_template("qwen2_5"), ("<|im_start|>", "<|im_end|>"), tags, "<|im_end|>"),
        "slca_compact": TemplateSpec(
            (_TEMPLATES_DIR / "slca_compact.jinja").read_text(encoding="utf-8"),
            ("<|im_start|>", "<|im_end|>"),
            tags,
            "<|im_end|>",
        ),
        "gemma3_tools": TemplateSpec(
            (_TEMPLATES_DIR / "gemma3_tools.jinja").read_text(encoding="utf-8"),
            ("<start_of_turn>", "<end_of_turn>"),
            (),
            "<end_of_turn>",
        ),
    }


def template_spec(name: str) -> TemplateSpec:
    templates = named_templates()
    if name not in templates:
        raise ChatFormatError(
            f"policy.chat_template {name!r} is not a known template; choose one of {sorted(templates)}"
        )
    return templates[name]


@dataclass(frozen=True)
class ChatFormat:
    """What a tokenizer's chat template defines: end of turn, stop set, call tags, training template."""

    end_of_turn: str
    end_of_turn_id: int
    stop_ids: frozenset[int]
    call_open: str
    call_close: str
    training_template: str
    hidden: tuple[str, ...]  # special-token texts dropped from a decoded turn

    @property
    def eos_token_id(self) -> int | list[int]:
        """The stop set as `generate` / a generation config take it: one id stays an int, as saved before."""
        ids = sorted(self.stop_ids)
        return ids[0] if len(ids) == 1 else ids

    @property
    def canonical(self) -> bool:
        return (self.call_open, self.call_close) == (CALL_OPEN, CALL_CLOSE)

    def turn_text(self, tokenizer: Any, ids: Sequence[int]) -> str:
        """A generated turn as canonical text: stop and control tokens dropped, calls in `<tool_call>` tags."""
        text = tokenizer.decode(list(ids), skip_special_tokens=False)
        for token in self.hidden:
            text = text.replace(token, "")
        if not self.canonical:
            text = text.replace(self.call_open, CALL_OPEN).replace(self.call_close, CALL_CLOSE)
        return text.strip()

    def model_text(self, text: str) -> str:
        """Canonical call text in this model's own tags (scripted turns written for this model)."""
        if self.canonical:
            return text
        return text.replace(CALL_OPEN, self.call_open).replace(CALL_CLOSE, self.call_close)


def render(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    **kwargs: Any,
) -> Any:
    """`apply_chat_template`, with a template failure turned into one line naming `policy.chat_template`."""
    from jinja2 import TemplateError

    try:
        return tokenizer.apply_chat_template(list(messages), tools=list(tools) if tools else None, **kwargs)
    except (TemplateError, TypeError, KeyError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ChatFormatError(
            f"the policy's chat template cannot render this conversation ({first}); "
            f"set policy.chat_template to one of {sorted(named_templates())}"
        ) from None


def _sentinel_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": _SENTINEL_TOOL,
            "description": "probe description",
            "parameters": {
                "type": "object",
                "properties": {_SENTINEL_KEY: {"type": "string"}},
                "required": [_SENTINEL_KEY],
            },
        },
    }


def _call_messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": _SENTINEL_TOOL, "arguments": {_SENTINEL_KEY: _SENTINEL_VALUE}},
                }
            ],
        },
    ]


def _refuse(reason: str) -> ChatFormatError:
    return ChatFormatError(
        f"the policy's chat template {reason}; set policy.chat_template to one of "
        f"{sorted(named_templates())} to install one"
    )


def _check_tools(tokenizer: Any) -> None:
    from trl.chat_template_utils import supports_tool_calling

    prompt = render(
        tokenizer,
        [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
        [_sentinel_tool()],
        tokenize=False,
        add_generation_prompt=True,
    )
    if _SENTINEL_TOOL not in prompt or _SENTINEL_KEY not in prompt:
        raise _refuse("does not render the offered tools")
    if not supports_tool_calling(tokenizer):
        raise _refuse("cannot render a tool call and its tool answer")


def _end_of_turn(tokenizer: Any) -> tuple[str, int]:
    """The first added token after an assistant message's content: the template's end of turn."""
    text = render(
        tokenizer,
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": _SENTINEL_REPLY},
            {"role": "user", "content": "again"},
        ],
        tokenize=False,
    )
    after = text[text.index(_SENTINEL_REPLY) + len(_SENTINEL_REPLY) :] if _SENTINEL_REPLY in text else ""
    added = set(tokenizer.get_added_vocab().values()) | set(tokenizer.all_special_ids)
    for token_id in tokenizer(after, add_special_tokens=False)["input_ids"]:
        if token_id in added:
            return tokenizer.convert_ids_to_tokens(token_id), int(token_id)
        if tokenizer.decode([token_id]).strip():
            break  # plain text before any control token: the turn has no end token of its own
    raise _refuse("ends an assistant turn without an end-of-turn token")


def _call_tags(tokenizer: Any, end_of_turn: str) -> tuple[str, str]:
    """The text the template writes just before and after a `{"name", "arguments"}` JSON call."""
    text = render(tokenizer, _call_messages(), tokenize=False)
    header = render(tokenizer, _call_messages()[:1], tokenize=False, add_generation_prompt=True)
    decoder, at = json.JSONDecoder(), text.find(f'"{_SENTINEL_TOOL}"')
    start = text.rfind("{", 0, at)
    while start >= 0:
        try:
            call, end = decoder.raw_decode(text, start)
        except ValueError:
            call, end = None, start
        if (
            isinstance(call, dict)
            and call.get("name") == _SENTINEL_TOOL
            and call.get("arguments") == {_SENTINEL_KEY: _SENTINEL_VALUE}
        ):
            break
        start = text.rfind("{", 0, start)
    else:
        raise _refuse("does not write a tool call as a JSON object with \"name\" and \"arguments\"")
    common = 0
    while common < min(len(text), len(header)) and text[common] == header[common]:
        common += 1
    before = [line.strip() for line in text[common:start].splitlines() if line.strip()]
    after = [line.strip() for line in text[end:].split(end_of_turn)[0].splitlines() if line.strip()]
    if not before or not after:
        raise _refuse("writes tool calls without tags around them")
    return before[-1], after[0]


def _stop_ids(tokenizer: Any, model: Any, end_of_turn_id: int) -> frozenset[int]:
    ids = {tokenizer.eos_token_id, end_of_turn_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, (list, tuple)) else [configured])
    return frozenset(int(i) for i in ids if i is not None)


def _training_template(tokenizer: Any) -> str:
    from trl.chat_template_utils import (
        get_training_chat_template,
        is_chat_template_stop_token_trained,
    )

    try:
        template = get_training_chat_template(tokenizer) or tokenizer.chat_template
    except ValueError:
        raise _refuse("has no {% generation %} markers for assistant-only loss and TRL cannot patch it") from None
    if not is_chat_template_stop_token_trained(tokenizer, template):
        raise _refuse("leaves the end-of-turn token outside the trained assistant span, so SFT never teaches stopping")
    return template


def chat_format(tokenizer: Any, model: Any = None) -> ChatFormat:
    """The tokenizer's ChatFormat (probed once per template and model end tokens, then cached)."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise _refuse("is missing (the tokenizer has none)")
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    key = (tokenizer.chat_template, tokenizer.eos_token_id, json.dumps(configured))
    cached = getattr(tokenizer, _CACHE_ATTR, None)
    if cached is not None and cached[0] == key:
        return cached[1]
    if cached is not None and model is None and cached[0][:2] == key[:2]:
        return cached[1]  # a caller without the model: the one it was probed with
    _check_tools(tokenizer)
    end_of_turn, end_of_turn_id = _end_of_turn(tokenizer)
    call_open, call_close = _call_tags(tokenizer, end_of_turn)
    stop_ids = _stop_ids(tokenizer, model, end_of_turn_id)
    keep = {call_open, call_close}
    hidden = {tokenizer.convert_ids_to_tokens(i) for i in stop_ids} | set(tokenizer.all_special_tokens)
    fmt = ChatFormat(
        end_of_turn,
        end_of_turn_id,
        stop_ids,
        call_open,
        call_close,
        _training_template(tokenizer),
        tuple(sorted(token for token in hidden - keep if token)),
    )
    setattr(tokenizer, _CACHE_ATTR, (key, fmt))
    return fmt


def apply_stop_ids(model: Any, fmt: ChatFormat) -> None:
    """Make the model's generation config end at the format's stop set (TRL reads it for RL rollouts)."""
    model.generation_config.eos_token_id = fmt.eos_token_id


def install_chat_template(model: Any, tokenizer: Any, name: str) -> list[str]:
    """Give `tokenizer` the named template: add its turn tokens, make its end of turn the end token, resize.

    Only the turn markers (`spec.special_tokens`, needed as single ids to stop a turn) are ever added.
    The call and response tags (`spec.plain_tokens`) are added only by a tokenizer built with them (the
    embedded policy's, whose rows are trained from scratch); on a pretrained vocabulary that lacks them
    they stay ordinary text: an added row starts untrained and, under LoRA, stays so (PEFT's
    trainable-token rows break TRL 1.16's fused LM head), so a model would never learn to open a call.
    A turn marker that is added starts from the mean of its text pieces' rows, not from noise.

    Returns the tokens it added (empty when the tokenizer already had them all)."""
    from transformers import AddedToken

    spec = template_spec(name)
    vocab = tokenizer.get_vocab()
    special = [token for token in spec.special_tokens if token not in vocab]
    pieces = {token: tokenizer(token, add_special_tokens=False)["input_ids"] for token in special}
    if special:
        tokenizer.add_tokens(
            [AddedToken(token, special=True, normalized=False) for token in special], special_tokens=True
        )
    tokenizer.chat_template = spec.text
    tokenizer.eos_token = spec.end_of_turn
    if model is not None:
        if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
            model.resize_token_embeddings(len(tokenizer))
        _init_from_pieces(model, tokenizer, pieces)
        model.config.get_text_config().eos_token_id = tokenizer.eos_token_id
    return special


def _init_from_pieces(model: Any, tokenizer: Any, pieces: Mapping[str, Sequence[int]]) -> None:
    """Each added token's input (and untied output) row: the mean of the rows of the pieces its text was."""
    import torch

    tables = [model.get_input_embeddings().weight]
    output = model.get_output_embeddings()
    if output is not None and output.weight is not tables[0]:
        tables.append(output.weight)
    with torch.no_grad():
        for token, ids in pieces.items():
            if ids:
                row = tokenizer.convert_tokens_to_ids(token)
                for table in tables:
                    table[row] = table[list(ids)].mean(dim=0)
