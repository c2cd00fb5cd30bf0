"""SFT sweep helpers: overrides, the report table and plot (the sweep itself is a long run)."""

from __future__ import annotations

import pytest

from slca.config import Params
from slca.train.sweep import apply_overrides, markdown, plot


def test_overrides_apply_dotted_keys_and_revalidate():
    params = apply_overrides(Params(), {"policy.tiny.vocab_size": 8192, "sft.max_length": 2048})
    assert params.policy.tiny.vocab_size == 8192 and params.sft.max_length == 2048
    with pytest.raises(ValueError, match="no key 'vocab'"):
        apply_overrides(Params(), {"policy.tiny.vocab": 1})
    with pytest.raises(ValueError, match="no section 'nope'"):
        apply_overrides(Params(), {"nope.x": 1})
    with pytest.raises(ValueError):
        apply_overrides(Params(), {"sft.max_steps": 0})  # validated again: ge=1


def test_report_lists_every_configuration(tmp_path):
    results = [{"name": name, "overrides": {"sft.max_steps": steps}, "sft_minutes": minutes,
                "sft": {"sft_examples": 990, "sft_dropped_too_long": 10, "sft_final_loss": 1.5},
                "val": {"success": s, "name_f1": 0.5, "arg_match": 0.2, "well_formed_calls": 0.9, "process": 0.6,
                        "no_call_accuracy": 1.0}}
               for name, steps, minutes, s in (("a", 700, 2.5, 0.0), ("b", 2000, 7.0, 0.25))]
    text = markdown(results, "python scripts/sft_sweep.py")
    assert "| a | — | 2.5 | 0.00 M | ? | 990 (10) | 1.500 | 0.000 |" in text
    assert "| b | max_steps=2000 | 7.0 |" in text and "python scripts/sft_sweep.py" in text
    assert plot(results, tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"
