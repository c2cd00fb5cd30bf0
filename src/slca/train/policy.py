"""Policy factory: the embedded tiny Qwen2 policy, or any local Hugging Face causal LM (+ LoRA).

The embedded default needs no download: a byte-level BPE tokenizer is trained on the synthesized
corpus (gold dialogues rendered by its own template) and carries the project's compact chat template
(`templates/slca_compact.jinja`): Qwen2.5 turns, `<tool_call>` and `<tool_response>` blocks exactly as
Qwen2.5-Instruct writes them, but each offered tool is one typed line instead of its JSON schema; a
Qwen2-architecture model of a few million parameters is built from `params.policy.tiny`. Any other
path is loaded with `local_files_only=True` and keeps its own chat template
(`slca.rollout.chat_format` reads its end of turn and call tags, or refuses it in one line);
`policy.chat_template` installs a named one instead.

    tokenizer = train_tokenizer(corpus_texts(tasks), vocab_size=4096, seed=0)
    model = build_tiny_model(params.policy.tiny, tokenizer, seed=0)
    model, tokenizer = load_policy("models/sft", params)
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    trainers,
)
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.models.qwen2.tokenization_qwen2 import (
    PRETOKENIZE_REGEX as QWEN2_PRETOKENIZE_REGEX,
)
from transformers.utils.chat_template_utils import render_jinja_template

from slca.rollout.chat import gold_conversation, render_prompt  # noqa: F401  (render_prompt re-exported)
from slca.rollout.chat_format import (
    apply_stop_ids,
    chat_format,
    install_chat_template,
    template_spec,
)

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
TOOL_TAGS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, IM_END, *TOOL_TAGS)
#: the embedded policy's template: one line per tool (`slca_compact`, also installable by name)
EMBEDDED_TEMPLATE = "slca_compact"
CHAT_TEMPLATE = template_spec(EMBEDDED_TEMPLATE).text


class PolicyError(ValueError):
    """A policy that cannot be built or loaded; the message names the path or key."""


#: named templates the embedded tokenizer can carry (they use its Qwen control tokens)
EMBEDDED_CAPABLE = ("slca_compact", "qwen2_5")


def embedded_template(params: Any) -> str:
    """The embedded policy's template: `policy.chat_template` when set (`qwen2_5` renders the tools as JSON
    schemas, as before the compact template), else `slca_compact`."""
    name = params.policy.chat_template or EMBEDDED_TEMPLATE
    if name not in EMBEDDED_CAPABLE:
        raise PolicyError(
            f"policy.chat_template {name!r} cannot be the embedded policy's template (its tokenizer has "
            f"Qwen's control tokens); choose one of {list(EMBEDDED_CAPABLE)} or set policy.model_path"
        )
    return template_spec(name).text


def render_chat(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    template: str = CHAT_TEMPLATE,
) -> str:
    """Render messages with the embedded template without needing a tokenizer (the tokenizer's corpus)."""
    rendered, _ = render_jinja_template(
        [list(messages)],
        tools=list(tools) if tools else None,
        chat_template=template,
        add_generation_prompt=add_generation_prompt,
    )
    return rendered[0]


def corpus_texts(tasks: Iterable[Mapping[str, Any]], template: str = CHAT_TEMPLATE) -> list[str]:
    """Rendered gold dialogues (tools, calls, responses, summary) of the given tasks."""
    return [render_chat(gold_conversation(task), task.get("tools"), template=template) for task in tasks]


def select_tasks(tasks: Sequence[Mapping[str, Any]], n: int, seed: int) -> list[Mapping[str, Any]]:
    """A seeded sample of n tasks, in a seeded order."""
    order = list(range(len(tasks)))
    random.Random(seed).shuffle(order)
    return [tasks[i] for i in order[:n]]


def select_by_kind(
    tasks: Sequence[Mapping[str, Any]], n: int, seed: int, shares: Mapping[str, float] | None
) -> list[Mapping[str, Any]]:
    """n tasks in a seeded order: each kind named in `shares` exactly round(n * share) of them, the rest a
    seeded draw over the other kinds (`select_tasks` when shares is empty)."""
    if not shares:
        return select_tasks(tasks, n, seed)
    rng = random.Random(seed)
    chosen: list[Mapping[str, Any]] = []
    for kind in sorted(shares):
        pool = [task for task in tasks if task.get("kind") == kind]
        want = round(n * shares[kind])
        if want > len(pool):
            raise ValueError(
                f"sft.kind_shares: {kind} {shares[kind]} of {n} is {want} examples, the train split has {len(pool)}"
            )
        chosen += rng.sample(pool, want)
    rest = [task for task in tasks if task.get("kind") not in shares]
    left = n - len(chosen)
    if left > len(rest):
        raise ValueError(f"sft.kind_shares: {left} examples of the other kinds asked, the train split has {len(rest)}")
    chosen += rng.sample(rest, left)
    rng.shuffle(chosen)
    return chosen


def tool_names(tasks: Iterable[Mapping[str, Any]]) -> list[str]:
    """Sorted names of the tools offered in the given tasks."""
    return sorted({tool["function"]["name"] for task in tasks for tool in task.get("tools") or []})


def tokenizer_for_tasks(tasks: Sequence[Mapping[str, Any]], params: Any) -> PreTrainedTokenizerFast:
    """The tiny policy's tokenizer, trained on a seeded sample of the given train tasks."""
    tiny, seed = params.policy.tiny, params.project.seed
    template = embedded_template(params)
    texts = corpus_texts(select_tasks(tasks, tiny.tokenizer_tasks, seed), template)
    return train_tokenizer(
        texts, tiny.vocab_size, seed, whole_words=tool_names(tasks), pretokenizer=tiny.pretokenizer, template=template
    )


def _strip_special(text: str) -> str:
    # BPE merges must not learn pieces of control tokens; they are added whole afterwards
    for token in SPECIAL_TOKENS:
        text = text.replace(token, "\n")
    return text


#: words, single digits, punctuation runs and whitespace runs, each its own piece
WORDS_PRETOKENIZE_REGEX = r"""\p{L}+|\p{N}|[^\s\p{L}\p{N}]+|\s+"""
#: the same, but a punctuation run keeps one space after it (`": "`, `", "`, `. `): the tool JSON
#: costs about half the extra tokens of "words", and a value is still the same tokens in the
#: request and in the call (94 % of copyable test values, against 24 % with Qwen2's split)
WORDSP_PRETOKENIZE_REGEX = r"""\p{L}+|\p{N}|[^\s\p{L}\p{N}]+ ?|\s+"""
#: as wordsp, but a run of digits is one piece (BPE merges common numbers): an id such as 10221 is a
#: few distinctive tokens instead of five single digits that an induction head must tell apart
WORDSN_PRETOKENIZE_REGEX = r"""\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+ ?|\s+"""
PRETOKENIZE_REGEXES = {
    "qwen2": QWEN2_PRETOKENIZE_REGEX,
    "words": WORDS_PRETOKENIZE_REGEX,
    "wordsp": WORDSP_PRETOKENIZE_REGEX,
    "wordsn": WORDSN_PRETOKENIZE_REGEX,
}


def train_tokenizer(
    texts: Iterable[str],
    vocab_size: int,
    seed: int = 0,
    whole_words: Sequence[str] = (),
    pretokenizer: str = "qwen2",
    template: str = CHAT_TEMPLATE,
    tags: Sequence[str] = TOOL_TAGS,
) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer with Qwen2.5 control tokens and the compact chat template.

    `whole_words` (the corpus's tool names) become single tokens, so a tiny model can copy a
    tool name from the offered schemas into its call with one tied-embedding lookup.
    `pretokenizer` "words" keeps a word apart from the space or quote before it, so `ACC` in
    "balance of ACC-10200" and in `"account_id": "ACC-10200"` is the same token.
    `tags` (the tool-call and response tags by default) become single tokens; `()` leaves them text,
    as in a pretrained vocabulary that lacks them.
    """
    if pretokenizer not in PRETOKENIZE_REGEXES:
        raise PolicyError(
            f"policy.tiny.pretokenizer must be one of {sorted(PRETOKENIZE_REGEXES)}, not {pretokenizer!r}"
        )
    corpus = sorted({_strip_special(text) for text in texts})
    if not corpus:
        raise PolicyError("tokenizer corpus is empty: synthesize the data first (data/train.jsonl)")
    random.Random(seed).shuffle(corpus)
    backend = Tokenizer(models.BPE(byte_fallback=False, fuse_unk=False))
    # Qwen2Tokenizer's normalizer; its pre-tokenizer or the words split (restored on reload by load_tokenizer)
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEXES[pretokenizer]), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[PAD_TOKEN, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(corpus, trainer=trainer)
    # Tool tags stay visible in decoded text (as in Qwen2.5): single tokens, but not special
    if tags:
        backend.add_tokens([AddedToken(tag, special=False, normalized=False) for tag in tags])
    backend.add_tokens(
        [AddedToken(word, special=False, normalized=False) for word in whole_words if word not in TOOL_TAGS]
    )
    return wrap_tokenizer(backend, template)


def wrap_tokenizer(backend: Tokenizer, template: str = CHAT_TEMPLATE) -> PreTrainedTokenizerFast:
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=PAD_TOKEN,
        unk_token=None,
        extra_special_tokens=[IM_START],
        model_max_length=1 << 20,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = template
    return tokenizer


def build_tiny_model(tiny: Any, tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen2ForCausalLM:
    """A freshly initialised Qwen2 causal LM sized by `params.policy.tiny`."""
    if tiny.hidden_size % tiny.num_attention_heads:
        raise PolicyError("policy.tiny.hidden_size must be divisible by policy.tiny.num_attention_heads")
    if tiny.num_attention_heads % tiny.num_key_value_heads:
        raise PolicyError("policy.tiny.num_attention_heads must be divisible by policy.tiny.num_key_value_heads")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=tiny.hidden_size,
        intermediate_size=tiny.intermediate_size,
        num_hidden_layers=tiny.num_hidden_layers,
        num_attention_heads=tiny.num_attention_heads,
        num_key_value_heads=tiny.num_key_value_heads,
        max_position_embeddings=tiny.max_position_embeddings,
        tie_word_embeddings=tiny.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model


def count_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def read_tasks(path: Path | str, limit: int | None = None) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.exists():
        raise PolicyError(f"{path} not found: run `slca synthesize` first")
    tasks = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                tasks.append(json.loads(line))
            if limit is not None and len(tasks) >= limit:
                break
    return tasks


def _apply_lora(model: Any, lora: Any) -> Any:
    # Adapters only: a named template adds no call tags to a pretrained vocabulary (they stay text) and
    # starts any turn marker it adds from its text pieces' rows (`install_chat_template`).
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules="all-linear", task_type="CAUSAL_LM"
    )
    return get_peft_model(model, config)


def load_tokenizer(path: Path | str) -> Any:
    """AutoTokenizer, with the pre-tokenizer that `tokenizer.json` was saved with.

    For a qwen2 config transformers rebuilds Qwen2Tokenizer's own pre-tokenizer on load; the
    embedded policy's "words" split would silently become Qwen2's and every id would shift. The
    saved file is the truth: when the two differ, the saved pre-tokenizer is put back.
    """
    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    saved = path / "tokenizer.json"
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if saved.exists() and backend is not None:
        on_disk = Tokenizer.from_file(str(saved)).pre_tokenizer
        if _component_json(on_disk) != _component_json(backend.pre_tokenizer):
            backend.pre_tokenizer = on_disk
    return tokenizer


def _component_json(component: Any) -> bytes | None:
    """A tokenizer component's own JSON (its pickle state), without serialising the whole vocabulary."""
    return None if component is None else component.__getstate__()


def _adapter_base(path: Path) -> None:
    """An adapter directory names its base model; a relative base that is not there fails in one line."""
    config = json.loads((path / "adapter_config.json").read_text(encoding="utf-8"))
    base = config.get("base_model_name_or_path")
    if not base or not Path(base).exists():
        raise PolicyError(
            f"{path} is a LoRA adapter whose base model {base!r} is not found from {Path.cwd()}; "
            "slca saves merged models, so retrain or merge this adapter onto its base"
        )


def _load_pretrained(path: Path, policy: Any) -> tuple[Any, Any]:
    if not path.exists():
        raise PolicyError(f"policy path {path} does not exist (no downloads: give a local model directory)")
    dtype = torch.bfloat16 if policy.dtype == "bfloat16" else torch.float32
    adapter = (path / "adapter_config.json").exists()
    try:
        tokenizer = load_tokenizer(path)
    except (OSError, ValueError) as error:
        raise PolicyError(f"cannot load policy from {path}: {str(error).splitlines()[0]}") from None
    if policy.chat_template is None and not adapter and getattr(tokenizer, "chat_template", None) is None:
        chat_format(tokenizer)  # refuses in one line before the weights are read
    try:
        if adapter:
            _adapter_base(path)
            from peft import AutoPeftModelForCausalLM

            model = AutoPeftModelForCausalLM.from_pretrained(
                path, is_trainable=True, dtype=dtype, local_files_only=True
            )
        else:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    except (OSError, ValueError) as error:
        raise PolicyError(f"cannot load policy from {path}: {str(error).splitlines()[0]}") from None
    if policy.chat_template is not None and not adapter:
        install_chat_template(model, tokenizer, policy.chat_template)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    apply_stop_ids(model, chat_format(tokenizer, model))  # refuses a template that cannot do tools or stop
    if policy.lora.enabled and not adapter:
        model = _apply_lora(model, policy.lora)
    return model, tokenizer


def load_policy(
    path_or_none: str | Path | None, params: Any, tokenizer: PreTrainedTokenizerFast | None = None
) -> tuple[Any, Any]:
    """(model, tokenizer): a saved/HF model at `path_or_none` (or `policy.model_path`), else the tiny model.

    The tiny model needs a tokenizer; without one it is trained on `<data.out_dir>/train.jsonl`.
    """
    path = path_or_none if path_or_none is not None else params.policy.model_path
    if path is not None:
        return _load_pretrained(Path(path), params.policy)
    if tokenizer is None:
        tokenizer = tokenizer_for_tasks(read_tasks(Path(params.data.out_dir) / "train.jsonl"), params)
    model = build_tiny_model(params.policy.tiny, tokenizer, params.project.seed)
    apply_stop_ids(model, chat_format(tokenizer, model))
    if params.policy.lora.enabled:
        model = _apply_lora(model, params.policy.lora)
    return model, tokenizer
