"""Rollout loop: response masks (environment tokens 0), stopping, rewards, generate_fn."""

from __future__ import annotations

import pytest
from policy_fixtures import (
    no_call_task,
    parallel_task,
    single_task,
    small_params,
    tiny_tasks,
)
from scripted_policy import FakeSession, ScriptedPolicy, gold_turns

from slca.rollout import (
    HFTurnGenerator,
    make_generate_fn,
    reward_fn,
    run_episodes,
    tool_suffix_ids,
)
from slca.train.policy import (
    build_tiny_model,
    corpus_texts,
    render_chat,
    train_tokenizer,
)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(corpus_texts(tiny_tasks(24)), vocab_size=700, seed=0)


def rollout(model, tokenizer, tasks, *, temperature=0.0, seed=0, **kwargs):
    options = {"env_factory": lambda task: FakeSession(), "max_turns": 3, "max_new_tokens": 128, "num_samples": 1}
    options.update(kwargs)
    generator = HFTurnGenerator(model, tokenizer, temperature=temperature, seed=seed)
    return run_episodes(generator, tasks, **options)


def test_gold_policy_reproduces_the_gold_dialogue_tokens(tokenizer):
    tasks = [single_task(0), parallel_task(1), no_call_task(2)]
    episodes = rollout(ScriptedPolicy(tokenizer, tasks), tokenizer, tasks)
    for task, episode in zip(tasks, episodes, strict=True):
        full = tokenizer.encode(render_chat(episode.messages, task["tools"]), add_special_tokens=False)
        # concatenated tokens = the template's rendering of the final dialogue (minus its trailing newline)
        assert episode.prompt_ids + episode.completion_ids == full[:-1]
        assert episode.stop_reason == "answer"
    assert [len(e.assistant_turns) for e in episodes] == [2, 2, 1]
    assert episodes[1].tool_responses[1] == '{"city": "Kyoto", "temp_c": 15, "sky": "cloudy"}'


def test_response_mask_is_zero_exactly_on_injected_tool_tokens(tokenizer):
    task = single_task(0)
    episode = rollout(ScriptedPolicy(tokenizer, [task]), tokenizer, [task])[0]
    learned = [t for t, m in zip(episode.completion_ids, episode.response_mask, strict=True) if m]
    injected = [t for t, m in zip(episode.completion_ids, episode.response_mask, strict=True) if not m]
    assert tokenizer.decode(injected) == (
        '\n<|im_start|>user\n<tool_response>\n{"city": "Lima", "temp_c": 14, '
        '"sky": "clear"}\n</tool_response><|im_end|>\n<|im_start|>assistant\n'
    )
    assert tokenizer.decode(learned) == (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n'
        '</tool_call><|im_end|>It is 14 C and clear in Lima.<|im_end|>'
    )
    # two learned runs (tool segment, summary segment) around one environment run
    runs = [m for i, m in enumerate(episode.response_mask) if i == 0 or m != episode.response_mask[i - 1]]
    assert runs == [1, 0, 1]


def test_loop_stops_after_max_turns_of_tool_calls(tokenizer):
    task = single_task(0)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>'
    model = ScriptedPolicy(tokenizer, [task], reply=lambda task, step: call)
    episode = rollout(model, tokenizer, [task], max_turns=2)[0]
    assert len(episode.assistant_turns) == 3
    assert len(episode.tool_responses) == 2
    assert episode.stop_reason == "max_turns"
    assert episode.summary == ""


def test_rewards_of_gold_and_silent_policies(tokenizer):
    params = small_params()
    tasks = [single_task(0), no_call_task(1)]
    gold = rollout(ScriptedPolicy(tokenizer, tasks), tokenizer, tasks, reward_fn=reward_fn(params))
    assert gold[0].r_tool == pytest.approx(1.0)
    assert gold[0].r_sum > 0.8
    assert gold[1].r_tool == pytest.approx(1.0)
    silent = ScriptedPolicy(tokenizer, tasks, reply=lambda task, step: "I do not know the answer.")
    lazy = rollout(silent, tokenizer, tasks[:1], reward_fn=reward_fn(params))[0]
    assert lazy.penalty and lazy.r_tool == 0.0 and lazy.r_sum == pytest.approx(-0.5)


def test_batched_sampling_is_deterministic_and_masks_tiny_model_output(tokenizer):
    model = build_tiny_model(small_params().policy.tiny, tokenizer, seed=0)
    tasks = [single_task(0), single_task(1)]
    first = rollout(model, tokenizer, tasks, temperature=1.0, num_samples=2, max_new_tokens=12, seed=5)
    second = rollout(model, tokenizer, tasks, temperature=1.0, num_samples=2, max_new_tokens=12, seed=5)
    assert [e.completion_ids for e in first] == [e.completion_ids for e in second]
    assert len(first) == 4 and all(len(e.completion_ids) == len(e.response_mask) for e in first)
    assert all(e.response_mask[: e.n_generated] == [1] * e.n_generated for e in first)


def test_tool_suffix_matches_trl_construction(tokenizer):
    suffix = tool_suffix_ids(tokenizer, [{"role": "tool", "name": "get_weather", "content": "{}"}])
    assert (
        tokenizer.decode(suffix)
        == "\n<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )


def test_generate_fn_returns_the_assistant_text(tokenizer):
    task = single_task(0)
    generate = make_generate_fn(ScriptedPolicy(tokenizer, [task]), tokenizer)
    text = generate(task["messages"], task["tools"])
    assert text == '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>'


def test_last_turn_with_text_and_a_call_has_no_summary(tokenizer):
    task = single_task(0)
    mixed = 'It is sunny.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>'
    episode = rollout(
        ScriptedPolicy(tokenizer, [task], reply=lambda task, step: mixed), tokenizer, [task], max_turns=1
    )[0]
    assert episode.stop_reason == "max_turns" and episode.last_turn_has_tool_call
    assert episode.summary == ""  # one rule for training and evaluation: a call in the last turn = no summary


def test_context_limit_is_per_episode_and_unseen_responses_are_not_recorded(tokenizer):
    """A long prompt runs out of room; its neighbour in the batch keeps its full budget."""
    short, long = single_task(0), single_task(1)
    long = {
        **long,
        "messages": [long["messages"][0], {"role": "user", "content": long["messages"][1]["content"] + " pad" * 120}],
    }
    policy = ScriptedPolicy(tokenizer, [short, long])
    lengths = {}
    for task in (short, long):
        ids = tokenizer.apply_chat_template(
            task["messages"], tools=task["tools"], tokenize=True, return_dict=False, add_generation_prompt=True
        )
        lengths[task["id"]] = len(ids)
    first_turn = len(tokenizer.encode(gold_turns(long)[0], add_special_tokens=False)) + 1
    # room for the long task's first turn, but not for the tool response after it
    policy.config.max_position_embeddings = lengths[long["id"]] + first_turn + 5
    assert lengths[short["id"]] + 60 < policy.config.max_position_embeddings
    short_ep, long_ep = rollout(policy, tokenizer, [short, long])
    assert long_ep.stop_reason == "length" and long_ep.tool_responses == [] and len(long_ep.turns) == 1
    assert all(m == 1 for m in long_ep.response_mask)  # no environment tokens were appended
    assert short_ep.stop_reason == "answer" and len(short_ep.tool_responses) == 1
    assert short_ep.summary == "It is 14 C and clear in Lima."


def test_training_stats_count_a_reformatted_repeat_as_redundant():
    from slca.rollout import Episode
    from slca.train.grpo_rollout import rollout_stats

    episode = Episode(
        single_task(0),
        0,
        [1],
        calls=[
            ['{"name": "get_weather", "arguments": {"city": "Lima"}}'],
            ['{"arguments":{"city":"Lima"},"name":"get_weather"}'],
        ],
    )
    assert rollout_stats([episode], 1.0)["rollout/redundant_call_rate"] == 0.5
