"""Which precision a CPU run trains and generates in: bf16 only where the processor computes it natively.

bf16 autocast and bf16 generation pay on CPUs with bf16 instructions (AVX512_BF16 or AMX on x86, the
BF16 extension on Arm): there SmolLM2's forward + backward ran 2.4x and batched decoding 5.3x faster
than fp32. Without them the same kernels convert every operand and run several times *slower* than
fp32 (measured on an AVX-512 Xeon without AVX512_BF16: forward + backward 3.5x, decoding 2x slower), so
a fixed `bf16` setting doubled `make run` on such a machine. `policy.cpu_bf16` and
`policy.generation_dtype` default to `auto`, resolved here once per process:

    cpu_autocast_bf16(params.policy.cpu_bf16)             # True / False / "auto" -> bool (CPU training)
    generation_dtype(params.policy.generation_dtype)      # "float32" / "bfloat16" / "auto" -> dtype name
    eval_generation_dtype(params)                         # eval.generation_dtype, "policy" = the line above
    native_bf16()                                         # does this CPU compute bf16 natively?
    cpu_model()                                           # which processor (experiment stamps, budget plans)

`auto` makes a run's numerics depend on the machine (bf16 and fp32 agree within noise, not bit for bit);
an experiment that must compare runs made on different machines pins both settings. Every stage's MLflow
run (sft, train, evaluate) is tagged with what they resolved to (`precision_tags`), and experiment
stamps and RL sweep rows record `precision_summary` as `precision`.
"""

from __future__ import annotations

import functools
import platform
from pathlib import Path
from typing import Any

__all__ = [
    "cpu_autocast_bf16",
    "cpu_model",
    "eval_generation_dtype",
    "generation_dtype",
    "native_bf16",
    "precision_summary",
    "precision_tags",
    "train_bf16",
]

# /proc/cpuinfo flags of processors with bf16 arithmetic (x86: AVX512_BF16, AMX-BF16; Arm: BF16)
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def _cpu_flags(cpuinfo: str) -> set[str]:
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in {"flags", "features"}:
            flags.update(value.split())
    return flags


def bf16_in_cpuinfo(cpuinfo: str) -> bool:
    """Whether a /proc/cpuinfo text names a bf16 instruction set."""
    return bool(_cpu_flags(cpuinfo) & _BF16_FLAGS)


@functools.cache
def _cpuinfo() -> str:
    """/proc/cpuinfo, read once a process; empty where there is none."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


@functools.cache
def native_bf16() -> bool:
    """This CPU computes bf16 natively (read from /proc/cpuinfo; False where it cannot be read: macOS on Apple
    silicon, M2 and later, has bf16, but without /proc there is no cheap check, so fp32)."""
    return bf16_in_cpuinfo(_cpuinfo())


def cpu_model_in_cpuinfo(cpuinfo: str) -> str | None:
    """The first processor's model name in a /proc/cpuinfo text, with its family and model numbers where given
    (virtual machines often report one generic name, such as "Intel(R) Xeon(R) Processor", for processors of
    different generations and speeds); None without a model name."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # end of the first processor's block
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    name = fields.get("model name")
    if not name:
        return None
    if fields.get("cpu family") and fields.get("model"):
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


@functools.cache
def cpu_model() -> str:
    """This machine's processor, as `cpu_model_in_cpuinfo` names it; where /proc/cpuinfo has no model name,
    what the platform module reports."""
    return cpu_model_in_cpuinfo(_cpuinfo()) or platform.processor() or platform.machine() or "unknown"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def cpu_autocast_bf16(setting: bool | str) -> bool:
    """Whether CPU training runs under bf16 autocast: the setting, with `auto` = the CPU has bf16."""
    if setting == "auto":
        return native_bf16()
    return bool(setting)


def train_bf16(setting: bool | str) -> bool:
    """Whether SFT and RL train under bf16 autocast (fp32 master weights) on this device: on CUDA wherever it
    supports bf16, on CPU as `cpu_autocast_bf16(setting)` says."""
    if _cuda():
        import torch

        return bool(torch.cuda.is_bf16_supported())
    return cpu_autocast_bf16(setting)


def generation_dtype(setting: str) -> str:
    """The dtype generation copies are cast to: `auto` = bfloat16 on a CUDA device with bf16 or on a CPU
    with native bf16, else float32."""
    if setting != "auto":
        return setting
    if _cuda():
        import torch

        return "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    return "bfloat16" if native_bf16() else "float32"


def eval_generation_dtype(params: Any) -> str:
    """The dtype evaluation generates in: `eval.generation_dtype` resolved, where `policy` means
    `policy.generation_dtype` (the dtype RL's rollouts sample in)."""
    setting = params.eval.generation_dtype
    return generation_dtype(params.policy.generation_dtype if setting == "policy" else setting)


def precision_summary(policy: Any, params: Any = None) -> dict[str, Any]:
    """What a run on this machine resolves `policy`'s precision settings to (stamps, sweep rows, tags); with
    `params`, also the dtype its evaluation generates in (`eval_generation_dtype`)."""
    summary = {
        "cpu_bf16": cpu_autocast_bf16(policy.cpu_bf16),
        "generation_dtype": generation_dtype(policy.generation_dtype),
        "native_bf16": native_bf16(),
        "machine": platform.machine(),
    }
    if params is not None:
        summary["eval_generation_dtype"] = eval_generation_dtype(params)
    return summary


def precision_tags(policy: Any, params: Any = None) -> dict[str, str]:
    """`precision_summary` as MLflow tags (`slca.precision.<key>`), set on every model stage's run."""
    return {f"slca.precision.{key}": str(value) for key, value in precision_summary(policy, params).items()}
