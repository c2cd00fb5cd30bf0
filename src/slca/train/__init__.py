"""Training: the policy factory (tiny default / HF path / LoRA), the SFT warm-up and the trainer.

    from slca.train import load_policy, train_tokenizer, build_tiny_model, render_prompt
"""

from slca.train.policy import (
    CHAT_TEMPLATE,
    SPECIAL_TOKENS,
    PolicyError,
    build_tiny_model,
    corpus_texts,
    count_parameters,
    load_policy,
    render_chat,
    render_prompt,
    train_tokenizer,
)

__all__ = [
    "CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "PolicyError",
    "build_tiny_model",
    "corpus_texts",
    "count_parameters",
    "load_policy",
    "render_chat",
    "render_prompt",
    "train_tokenizer",
]
