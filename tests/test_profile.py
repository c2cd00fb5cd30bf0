"""Params profiles: `slca --profile real <stage>` and `slca profile real --write params.yaml`."""

from __future__ import annotations

from typer.testing import CliRunner

from slca.cli import app
from slca.config import Params, apply_profile, dump_params, load_params


def test_the_real_profile_sets_pretrained_defaults_and_writes_a_params_file(tmp_path):
    source = tmp_path / "params.yaml"
    source.write_text(dump_params(Params()))
    out = tmp_path / "real.yaml"
    result = CliRunner().invoke(app, ["profile", "real", "--params", str(source), "--model-path", "/m/qwen",
                                      "--write", str(out)])
    assert result.exit_code == 0, result.output
    params = load_params(out)
    assert params.policy.model_path == "/m/qwen"
    assert params.policy.lora.enabled and params.sft.learning_rate == 2e-4 and params.train.learning_rate == 1e-5
    assert params.train.max_completion_length == 512 and params.policy.dtype == "float32"
    assert apply_profile(Params(), "real").model_dump() == {**params.model_dump(), "policy": {
        **params.model_dump()["policy"], "model_path": None}}


def test_an_unknown_profile_is_one_line_and_writes_nothing(tmp_path):
    source = tmp_path / "params.yaml"
    source.write_text(dump_params(Params()))
    out = tmp_path / "out.yaml"
    result = CliRunner().invoke(app, ["--profile", "fast", "sft", "--params", str(source)])
    assert result.exit_code == 2 and "profile 'fast' not found; choose one of ['real']" in result.output
    result = CliRunner().invoke(app, ["profile", "fast", "--params", str(source), "--write", str(out)])
    assert result.exit_code == 2 and not out.exists()
