"""The drop-in trainer on TRL's own multi-turn API: examples/trl_environment.py run for real.

A user-defined environment (two tools that are not slca's) and the user's two reward functions; the
advantages TRL's loss receives are per token, equal to `slca.credit.compute_advantages` on the same
rollouts, and the run's samples open in the dashboard's credit explorer.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from slca import dashboard_data, dashboard_groups
from slca.credit import compute_advantages, segment_masks
from slca.trl import SegmentGRPOTrainer
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "trl_environment.py"


def load_example():
    spec = importlib.util.spec_from_file_location("trl_environment_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example_run(tmp_path_factory):
    """Run the example's main for 3 steps, recording what each step's credit saw and what the loss got."""
    out = tmp_path_factory.mktemp("trl-example")
    scored, losses = [], []
    original_advantages = SegmentGRPOTrainer._segment_advantages
    original_loss = SegmentGRPOTrainer._compute_loss

    def record_advantages(self, output):
        advantages = original_advantages(self, output)
        scored.append(
            {
                "output": {k: v.clone() for k, v in output.items() if isinstance(v, torch.Tensor)},
                "tail": self._segment_rows(output)["tail"].clone(),
                "r_tool": self.last_credit["r_tool"].clone(),
                "r_sum": self.last_credit["r_sum"].clone(),
                "rewards": self._stash["rewards"].clone(),
                "advantages": advantages.clone(),
            }
        )
        return advantages

    def record_loss(self, model, inputs):
        losses.append({"completion_ids": inputs["completion_ids"].clone(), "advantages": inputs["advantages"].clone()})
        return original_loss(self, model, inputs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SegmentGRPOTrainer, "_segment_advantages", record_advantages)
        patch.setattr(SegmentGRPOTrainer, "_compute_loss", record_loss)
        trainer = load_example().main(["--steps", "3", "--out", str(out)])
    return trainer, scored, losses, out


def test_the_loss_gets_per_token_advantages_equal_to_the_credit_core_on_the_same_rollouts(example_run):
    trainer, scored, losses, _ = example_run
    assert trainer.state.global_step == 3 and len(scored) == 3 and len(losses) == 3
    names = list(trainer.reward_func_names)
    assert names == ["lending_reward", "answer_reward"]
    split_rows = 0
    for step, loss in zip(scored, losses):
        output = step["output"]
        response = output["completion_mask"] * output["tool_mask"]
        tool, summary = segment_masks(response, last_run_has_tool_call=step["tail"])
        group_ids = torch.arange(response.size(0)) // 4
        r_tool = step["rewards"][:, names.index("lending_reward")].double()
        r_sum = step["rewards"][:, names.index("answer_reward")].double()
        expected = compute_advantages("slca", r_tool, r_sum, tool, summary, group_ids)
        assert torch.equal(step["r_tool"], r_tool) and torch.equal(step["r_sum"], r_sum)
        assert torch.allclose(step["advantages"], expected[:, : response.size(1)])
        # what TRL's loss received (its batch may be shuffled): the same row for the same completion
        assert loss["advantages"].dim() == 2 and loss["advantages"].shape == loss["completion_ids"].shape
        by_completion = {tuple(ids.tolist()): row for ids, row in zip(output["completion_ids"], step["advantages"])}
        assert loss["advantages"].dtype == torch.float32  # TRL's own advantages' dtype, not float64
        for ids, row in zip(loss["completion_ids"], loss["advantages"]):
            assert torch.equal(row, by_completion[tuple(ids.tolist())].float())
        # per token: rows with both segments get one value on tool tokens and another on summary tokens
        for row in range(response.size(0)):
            if tool[row].any() and summary[row].any():
                on_tool = step["advantages"][row][tool[row]].unique()
                on_summary = step["advantages"][row][summary[row]].unique()
                assert on_tool.numel() == 1 and on_summary.numel() == 1
                split_rows += bool(on_tool.item() != on_summary.item())
            assert not step["advantages"][row][response[row] == 0].any()  # tool output and padding get none
    assert split_rows > 0, "no rollout had different tool and summary advantages"


def test_the_tool_segment_holds_the_calls_the_environment_executed(example_run):
    trainer, scored, _, _ = example_run
    tokenizer = trainer.processing_class
    calls = 0
    for step in scored:
        output = step["output"]
        response = output["completion_mask"] * output["tool_mask"]
        tool, _ = segment_masks(response, last_run_has_tool_call=step["tail"])
        for row in range(response.size(0)):
            text = tokenizer.decode(output["completion_ids"][row][tool[row]].tolist())
            calls += text.count("<tool_call>")
            if tool[row].any():
                assert "<tool_call>" in text
    assert calls > 0


def test_the_examples_samples_open_in_the_credit_explorer(example_run):
    _, _, _, out = example_run
    runs = dashboard_data.disk_sample_runs(out / "models")
    assert list(runs) == ["trl-example-slca"]
    steps = dashboard_data.disk_sample_steps(runs["trl-example-slca"])
    assert steps == [0, 1, 2]
    sample = dashboard_data.load_disk_sample(runs["trl-example-slca"], steps[-1])
    assert sample["estimator"] == "slca"
    groups = dashboard_groups.sample_groups(sample, 4)
    assert groups and all(
        len(r["tokens"]) == len(r["advantages"]) == len(r["tool_mask"]) for g in groups for r in g.rollouts
    )
    html = dashboard_groups.group_html(groups[0], ["advantages", "advantages_grpo"], 1.0, "slca")
    assert 'data-view="estimator"' in html and 'data-view="grpo"' in html


def test_a_segment_reward_that_is_not_a_reward_function_is_refused_in_one_line():
    example = load_example()
    model, tokenizer = example.tiny_policy(0)
    from datasets import Dataset
    from trl import GRPOConfig

    args = GRPOConfig(
        output_dir="/tmp/unused-slca-trl",
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
    )
    dataset = Dataset.from_list([{"prompt": example.request("Dune"), "title": "Dune"}])
    with pytest.raises(
        ValueError,
        match=(
            r"summary reward 'answer' is not one of the trainer's rewards "
            r"\['lending_reward', 'answer_reward'\]"
        ),
    ):
        SegmentGRPOTrainer(
            model,
            reward_funcs=[example.lending_reward, example.answer_reward],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            environment_factory=example.Library,
            tool_reward="lending_reward",
            summary_reward="answer",
        )
    with pytest.raises(ValueError, match="needs tool_reward="):
        SegmentGRPOTrainer(
            model,
            reward_funcs=[example.lending_reward],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            environment_factory=example.Library,
            summary_reward=0,
        )
    with pytest.raises(
        ValueError,
        match=(
            r"the 'toolpo' estimator reads one more reward: pass "
            r"extra_rewards=\{'call_accuracy': <reward name or index>\}"
        ),
    ):
        SegmentGRPOTrainer(
            model,
            reward_funcs=[example.lending_reward],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            tool_reward=0,
            summary_reward=0,
            estimator="toolpo",
        )
    with pytest.raises(ValueError, match=r"unknown estimator|not a registered|estimator"):
        SegmentGRPOTrainer(
            model,
            reward_funcs=[example.lending_reward],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            tool_reward=0,
            summary_reward=0,
            estimator="ppo",
        )
