"""`auto` precision: bf16 autocast and bf16 generation copies only on a CPU that computes bf16 natively.

Without bf16 instructions the same kernels run several times slower than fp32 (benchmarks/policy_cost.py),
so the default must read the processor, and a pinned setting must stay what it says.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from slca.config import Params, ParamsError, load_params
from slca.rollout import precision
from slca.rollout.cached import GenerationCopy
from slca.train.sft import sft_config

XEON_WITHOUT_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni avx512_vbmi2\n"
XEON_WITH_AMX = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
REPO = Path(__file__).resolve().parents[1]
ARM_NEOVERSE = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n"


def test_cpuinfo_names_bf16_only_where_the_instructions_are():
    assert not precision.bf16_in_cpuinfo(XEON_WITHOUT_BF16)
    assert precision.bf16_in_cpuinfo(XEON_WITH_AMX)
    assert precision.bf16_in_cpuinfo(ARM_NEOVERSE)
    assert not precision.bf16_in_cpuinfo("")
    assert not precision.bf16_in_cpuinfo("model name\t: bf16 in a name is not a flag\n")


def test_cpuinfo_names_the_first_processor_with_its_family_and_model():
    two = (
        "processor\t: 0\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Processor\n\n"
        "processor\t: 1\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: another\n"
    )
    assert precision.cpu_model_in_cpuinfo(two) == "Intel(R) Xeon(R) Processor (family 6, model 207)"
    assert precision.cpu_model_in_cpuinfo("model name\t: Neoverse\n") == "Neoverse"  # no family/model numbers
    assert precision.cpu_model_in_cpuinfo(ARM_NEOVERSE) is None  # Arm's cpuinfo may name no model
    cpuinfo = Path("/proc/cpuinfo")
    here = precision.cpu_model_in_cpuinfo(cpuinfo.read_text()) if cpuinfo.exists() else None
    assert precision.cpu_model() and precision.cpu_model() == (here or precision.cpu_model())


@pytest.mark.parametrize("native", [True, False])
def test_auto_follows_the_processor_and_pinned_settings_stay_pinned(monkeypatch, native):
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    monkeypatch.setattr(precision, "_cuda", lambda: False)
    assert precision.cpu_autocast_bf16("auto") is native
    assert precision.generation_dtype("auto") == ("bfloat16" if native else "float32")
    assert precision.cpu_autocast_bf16(True) is True and precision.cpu_autocast_bf16(False) is False
    assert precision.generation_dtype("float32") == "float32"
    assert precision.generation_dtype("bfloat16") == "bfloat16"
    policy = Params().policy.model_copy(update={"cpu_bf16": "auto", "generation_dtype": "auto"})
    summary = precision.precision_summary(policy)
    assert summary["cpu_bf16"] is native and summary["native_bf16"] is native
    assert summary["generation_dtype"] == ("bfloat16" if native else "float32")


@pytest.mark.parametrize("native", [True, False])
def test_sft_and_generation_resolve_auto_the_same_way(monkeypatch, tmp_path, native):
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    monkeypatch.setattr(precision, "_cuda", lambda: False)
    params = Params()
    params = params.model_copy(
        update={"policy": params.policy.model_copy(update={"cpu_bf16": "auto", "generation_dtype": "auto"})}
    )
    if torch.cuda.is_available():
        pytest.skip("the CPU setting is read only where there is no CUDA device")
    assert sft_config(params, str(tmp_path)).bf16 is native
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2
    )
    model = LlamaForCausalLM(config).eval()
    copy = GenerationCopy(model, params.policy.generation_dtype)
    assert copy.dtype == (torch.bfloat16 if native else torch.float32)
    # fp32 generation from an fp32 model without LoRA reads the model itself; bf16 makes a cast copy
    assert (copy.refresh() is model) is (not native)


def test_a_precision_setting_outside_the_choices_is_refused_in_one_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("policy:\n  cpu_bf16: sometimes\n")
    with pytest.raises(ParamsError) as error:
        load_params(path)
    assert "policy.cpu_bf16" in str(error.value) and "\n" not in str(error.value)
    path.write_text("policy:\n  cpu_bf16: auto\n  generation_dtype: auto\n")
    loaded = load_params(path).policy
    assert loaded.cpu_bf16 == "auto" and loaded.generation_dtype == "auto"


def test_the_default_policy_reads_the_processor():
    defaults = load_params(REPO / "params.yaml").policy
    assert defaults.cpu_bf16 == "auto" and defaults.generation_dtype == "auto"


@pytest.mark.parametrize("native", [True, False])
def test_evaluation_generates_in_its_own_dtype_or_the_policys(monkeypatch, native):
    """`eval.generation_dtype: policy` follows `policy.generation_dtype` (RL's rollouts); a pinned one holds
    whatever the policy's setting and the processor say, and the summary records what evaluation ran in."""
    monkeypatch.setattr(precision, "native_bf16", lambda: native)
    monkeypatch.setattr(precision, "_cuda", lambda: False)
    base = Params()
    for policy_setting, eval_setting, expected in [
        ("auto", "policy", "bfloat16" if native else "float32"),
        ("bfloat16", "policy", "bfloat16"),
        ("auto", "float32", "float32"),
        ("bfloat16", "float32", "float32"),
        ("float32", "bfloat16", "bfloat16"),
        ("float32", "auto", "bfloat16" if native else "float32"),
    ]:
        params = base.model_copy(
            update={
                "policy": base.policy.model_copy(update={"generation_dtype": policy_setting}),
                "eval": base.eval.model_copy(update={"generation_dtype": eval_setting}),
            }
        )
        assert precision.eval_generation_dtype(params) == expected
        summary = precision.precision_summary(params.policy, params)
        assert summary["eval_generation_dtype"] == expected
        assert summary["generation_dtype"] == precision.generation_dtype(policy_setting)
    assert "eval_generation_dtype" not in precision.precision_summary(base.policy)


def test_evaluation_of_the_default_params_generates_in_fp32():
    """params.yaml samples RL's rollouts in `auto` but evaluates greedy in fp32 on every machine."""
    defaults = load_params(REPO / "params.yaml")
    assert defaults.eval.generation_dtype == "float32"
    assert precision.eval_generation_dtype(defaults) == "float32"
