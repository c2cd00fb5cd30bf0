"""Training: the policy factory (tiny default / HF path / LoRA), the SFT warm-up and the trainer.

    from slca.train import load_policy, train_tokenizer, build_tiny_model, render_prompt

The names are read from `slca.train.policy` on first use, so importing a light submodule (the `base`
stage's `slca.train.convert`) does not load the policy stack.
"""

from typing import Any

#: a folder for cached step-0 validations of the learning curve (`slca.train.val_curve`); unset: none
START_CACHE_ENV = "SLCA_VAL_START_CACHE"

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


def __getattr__(name: str) -> Any:
    if name in __all__:
        from slca.train import policy

        return getattr(policy, name)
    raise AttributeError(f"module 'slca.train' has no attribute {name!r}")
