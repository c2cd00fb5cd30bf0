"""params.yaml ↔ slca.config: strict typing, one-line errors, exit code 2 from the CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from slca.config import Params, ParamsError, dump_params, load_params, parse_params
from tests.conftest import REPO_ROOT


def _keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys = set()
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys |= _keys(annotation, f"{prefix}{name}.")
        else:
            keys.add(f"{prefix}{name}")
    return keys


def _flat(mapping: dict, prefix: str = "", leaves: frozenset[str] = frozenset()) -> set[str]:
    """Dotted keys of a nested mapping; a key in ``leaves`` is one knob even when its value is a mapping."""
    keys = set()
    for name, value in mapping.items():
        if isinstance(value, dict) and f"{prefix}{name}" not in leaves:
            keys |= _flat(value, f"{prefix}{name}.", leaves)
        else:
            keys.add(f"{prefix}{name}")
    return keys


def test_repo_params_file_is_valid_and_lists_every_knob():
    params = load_params(REPO_ROOT / "params.yaml")
    assert isinstance(params, Params)
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    knobs = _keys(Params)
    assert _flat(raw, leaves=frozenset(knobs)) == knobs, "params.yaml must list every knob of slca.config"


def test_every_field_has_help_text():
    def walk(model: type[BaseModel]):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no help text"
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                walk(annotation)

    walk(Params)


def test_defaults_round_trip_through_yaml(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(dump_params(Params()))
    assert load_params(path) == Params()


def test_params_are_frozen():
    params = Params()
    with pytest.raises(ValidationError, match="frozen"):
        params.train.max_steps = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"train": {"max_stpes": 3}}, "key 'train.max_stpes': Extra inputs are not permitted"),
        ({"train": {"max_steps": "30"}}, "key 'train.max_steps': Input should be a valid integer"),
        ({"train": {"max_steps": 0}}, "key 'train.max_steps': Input should be greater than or equal to 1"),
        ({"rewards": {"judge": "gpt"}}, "key 'rewards.judge'"),
        ({"data": {"kind_mix": {"single": "a lot"}}}, "key 'data.kind_mix.single'"),
        ({"bogus_section": {}}, "key 'bogus_section'"),
        (["not", "a", "mapping"], "top level must be a mapping"),
        (
            {"pipeline": {"item_heartbeat_s": 30, "item_lost_after_s": 45}},
            "key 'pipeline': Value error, item_lost_after_s (45) must be at least twice item_heartbeat_s (30)",
        ),
    ],
)
def test_bad_params_give_one_line_naming_the_key(raw, expected):
    with pytest.raises(ParamsError) as info:
        parse_params(raw, "params.yaml")
    message = str(info.value)
    assert expected in message
    assert "\n" not in message
    assert message.startswith("params.yaml")


def test_malformed_yaml_names_the_line(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  max_steps: [1, 2\n")
    with pytest.raises(ParamsError, match=r"malformed YAML at line \d+"):
        load_params(path)


def test_missing_file_is_a_params_error(tmp_path):
    with pytest.raises(ParamsError, match="cannot read params file"):
        load_params(tmp_path / "nope.yaml")


def test_cli_exits_2_with_one_line_on_bad_params(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text("train:\n  learning_rate: fast\n")
    result = subprocess.run(
        [sys.executable, "-m", "slca.cli", "synthesize", "--params", str(path)],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "train.learning_rate" in lines[0] and "valid number" in lines[0]
