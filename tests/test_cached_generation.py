"""The cached turn generator: the same greedy turns as re-reading every sequence, less work, seeded sampling.

A tiny random Qwen2 (fp32) stands in for the policy: greedy decoding is a pure function of the
sequence, so the cached generator must write exactly what `HFTurnGenerator` (transformers' `generate`
over the whole sequence) writes, round after round, with tool messages appended between rounds, with
a GRPO group sharing one prompt prefill, and with episodes dropping out.
"""

from __future__ import annotations

import pytest
import torch
from policy_fixtures import no_call_task, parallel_task, single_task, tiny_tasks

from slca.config import LoraParams, TinyModelParams
from slca.rollout.cached import CachedTurnGenerator, GenerationCopy, GrowingLayer
from slca.rollout.loop import HFTurnGenerator, new_episodes
from slca.train.policy import _apply_lora, build_tiny_model, corpus_texts, train_tokenizer

TINY = TinyModelParams(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=700,
    max_position_embeddings=2048,
)


@pytest.fixture(scope="module")
def policy():
    tokenizer = train_tokenizer(corpus_texts(tiny_tasks(12)), 700, 0)
    torch.manual_seed(0)
    model = build_tiny_model(TINY, tokenizer, 0).eval()
    return model, tokenizer


def _rounds(generator, episodes, tokenizer, budgets=(12, 7, 12, 3)):
    """Three rounds as the engine drives them: turns appended, a tool message after each, one episode done."""
    out = []
    live = list(episodes)
    suffix = tokenizer("\n<tool_response>\n{\"ok\": true}\n</tool_response>", add_special_tokens=False)["input_ids"]
    for round_index in range(3):
        turns = generator.generate(live, [budgets[i % len(budgets)] for i in range(len(live))], round_index)
        out.append([t.ids for t in turns])
        for episode, turn in zip(live, turns, strict=True):
            episode.append(turn.ids, True)
            episode.append(suffix[: 3 + episode.sample_idx], False)  # tool messages of different lengths
        live = live[1:]  # the first episode stops; the rest go on
    return out


def test_greedy_turns_equal_generate_over_the_whole_sequence_across_rounds_and_groups(policy):
    model, tokenizer = policy
    tasks = [single_task(0, "test"), single_task(3, "test")]
    generator = CachedTurnGenerator(model, tokenizer)
    cached = _rounds(generator, new_episodes(tasks, tokenizer, 2), tokenizer)
    full = _rounds(HFTurnGenerator(model, tokenizer), new_episodes(tasks, tokenizer, 2), tokenizer)
    assert cached == full
    # rows closed mid-turn left the decode batch and came back for the next round's turn
    assert generator.parked_rows > 0
    assert [len(turns) for turns in cached] == [4, 3, 2]
    assert any(len(turn) > 1 for turns in cached for turn in turns)


def test_a_group_reads_its_prompt_once_and_later_rounds_read_only_what_is_new(policy):
    model, tokenizer = policy
    tasks = [single_task(1, "test")]
    generator = CachedTurnGenerator(model, tokenizer)
    episodes = new_episodes(tasks, tokenizer, 4)
    prompt = len(episodes[0].prompt_ids)
    generator.generate(episodes, [1] * 4, 0)  # one token each: prefill + the pending last prompt token
    assert generator.forward_tokens == (prompt - 1) + 4  # one prefill for the group, not four
    hf_reads = 4 * prompt
    assert generator.forward_tokens < hf_reads / 3


def test_sampling_is_seeded_per_call_and_reproducible(policy):
    model, tokenizer = policy
    tasks = [single_task(2, "test")]

    def draw(seed: int, calls: int) -> list[list[int]]:
        generator = CachedTurnGenerator(model, tokenizer, temperature=1.0, seed=seed)
        generator.calls = calls
        return [t.ids for t in generator.generate(new_episodes(tasks, tokenizer, 4), [10] * 4, 0)]

    assert draw(0, 5) == draw(0, 5)
    assert draw(0, 5) != draw(0, 6) and draw(0, 5) != draw(1, 5)
    rows = draw(0, 5)
    assert len({tuple(row) for row in rows}) > 1  # the group's members differ


def test_the_generation_copy_merges_lora_without_touching_the_trained_weights(policy):
    _, tokenizer = policy
    peft = _apply_lora(build_tiny_model(TINY, tokenizer, 0), LoraParams(enabled=True, r=4, alpha=8, dropout=0.0))
    with torch.no_grad():
        for name, parameter in peft.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.2)  # a trained adapter: B is zero at initialisation
    before = {name: p.detach().clone() for name, p in peft.named_parameters()}
    copy = GenerationCopy(peft, "float32")
    plain = copy.refresh()
    ids = torch.tensor([tokenizer("hello tools", add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(plain(input_ids=ids).logits, peft(input_ids=ids).logits, atol=1e-5)
        for name, parameter in peft.named_parameters():
            if "lora_B" in name:
                parameter.add_(0.1)  # a training step
    refreshed = copy.refresh()
    assert refreshed is plain
    with torch.no_grad():
        assert torch.allclose(plain(input_ids=ids).logits, peft(input_ids=ids).logits, atol=1e-5)
    changed = {name for name, p in peft.named_parameters() if not torch.equal(p, before[name])}
    assert changed and all("lora_B" in name for name in changed)  # the base weights were never written
    assert next(GenerationCopy(peft, "bfloat16").refresh().parameters()).dtype == torch.bfloat16


def test_the_generation_copy_of_a_trl_patched_policy_runs_its_own_weights(policy):
    """TRL's GRPO trainer patches its policy's forward on the instance, closing over the original forward;
    the copy must run the copy (merged, in its own dtype), never the trained model's layers."""
    from trl.trainer.utils import add_fused_lm_head

    _, tokenizer = policy
    base = build_tiny_model(TINY, tokenizer, 0)
    add_fused_lm_head(base, outputs=("log_probs", "entropy"))  # as GRPOTrainer does, before PEFT
    peft = _apply_lora(base, LoraParams(enabled=True, r=4, alpha=8, dropout=0.0))
    with torch.no_grad():
        for name, parameter in peft.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.2)
    copies = {dtype: GenerationCopy(peft, dtype).refresh() for dtype in ("float32", "bfloat16")}
    calls = []  # hooked after copying: a deep copy would carry the hooks along
    hooks = [m.register_forward_pre_hook(lambda *_: calls.append(1)) for m in peft.modules()]
    ids = torch.tensor([tokenizer("hello tools", add_special_tokens=False)["input_ids"]])
    for dtype, plain in copies.items():
        with torch.no_grad():
            logits = plain(input_ids=ids).logits
        assert calls == [], f"the {dtype} copy ran the trained model's modules"
        assert logits.dtype == getattr(torch, dtype)
        assert not any("lora" in type(m).__module__ for m in plain.modules())
    for hook in hooks:
        hook.remove()
    with torch.no_grad():
        expected = peft(input_ids=ids).logits
        assert torch.allclose(GenerationCopy(peft, "float32").refresh()(input_ids=ids).logits, expected, atol=1e-5)
    assert "forward" in base.__dict__  # the trained model keeps TRL's patch (its loss needs it)


def test_the_growing_cache_layer_keeps_what_concatenation_keeps():
    layer, reference = GrowingLayer(), []
    torch.manual_seed(0)
    for width in (5, 1, 1, 70, 1):
        keys = torch.randn(3, 2, width, 4)
        got, _ = layer.update(keys, keys + 1)
        reference.append(keys)
        assert torch.equal(got, torch.cat(reference, dim=-2))
    layer.batch_select_indices(torch.tensor([2, 0, 0]))
    expected = torch.cat(reference, dim=-2)[[2, 0, 0]]
    assert torch.equal(layer.keys, expected) and torch.equal(layer.values, expected + 1)
    got, _ = layer.update(torch.zeros(3, 2, 1, 4), torch.zeros(3, 2, 1, 4))
    assert got.shape == (3, 2, 79, 4) and torch.equal(got[..., :78, :], expected)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_padding_is_masked_whatever_the_generation_dtype(policy, dtype):
    """A left-padded row writes the same tokens whatever its padding holds: the padding is masked out in
    the prefill and the decode steps. (The bf16 copy's missing padding mask showed on SmolLM2, not on this
    Qwen2 toy: tests/test_smollm2.py checks that case.)"""
    model, tokenizer = policy
    tasks = [single_task(0, "test"), parallel_task(1, "test")]  # prompts of different lengths: one row padded

    def turns(pad_id: int) -> list[list[int]]:
        generator = CachedTurnGenerator(model, tokenizer, dtype=dtype)
        generator.pad_id = pad_id
        return [t.ids for t in generator.generate(new_episodes(tasks, tokenizer, 1), [8, 8], 0)]

    lengths = [len(e.prompt_ids) for e in new_episodes(tasks, tokenizer, 1)]
    assert lengths[0] != lengths[1]
    assert turns(tokenizer.pad_token_id) == turns(5) == turns(17)


def test_sampling_draws_each_token_at_its_filtered_probability():
    """One uniform draw a row through the CDF: frequencies follow softmax(logits / T) after top-k / top-p."""
    from slca.rollout.cached import sample_next

    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(20000, 1)
    generator = torch.Generator().manual_seed(0)
    counts = torch.bincount(sample_next(logits, 1.0, 0, 1.0, generator), minlength=4).float() / 20000
    torch.testing.assert_close(counts, torch.tensor([0.5, 0.3, 0.15, 0.05]), atol=0.015, rtol=0)
    kept = torch.bincount(sample_next(logits, 1.0, 0, 0.7, generator), minlength=4).float() / 20000
    assert kept[2:].sum() == 0 and abs(float(kept[0]) - 0.5 / 0.8) < 0.015  # top-p 0.7 keeps the first two
    assert set(sample_next(logits[:50], 1.0, 1, 1.0, generator).tolist()) == {0}  # top-k 1
    same = [sample_next(logits[:64], 1.0, 0, 1.0, torch.Generator().manual_seed(3)) for _ in range(2)]
    assert torch.equal(*same)


@pytest.mark.parametrize("groups", [1, 3])
def test_decode_attention_equals_sdpa_with_grouped_heads_and_padding(groups):
    """A decode step's attention as two matmuls gives SDPA's output, masked slots included (bool or additive)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from slca.rollout.cached import _decode_attention

    class Attention:
        num_key_value_groups = groups

    torch.manual_seed(0)
    query, key, value = torch.randn(4, 3 * groups, 1, 16), torch.randn(4, 3, 29, 16), torch.randn(4, 3, 29, 16)
    mask = torch.ones(4, 1, 1, 29, dtype=torch.bool)
    mask[1, ..., :7] = False  # left padding
    mask[2, ..., -1] = False  # a closed row's masked pad
    expected, _ = sdpa_attention_forward(Attention(), query, key, value, mask, scaling=0.3)
    got, _ = _decode_attention(query, key, value, mask, 0.3, torch.float32)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    additive = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(_decode_attention(query, key, value, additive, 0.3, torch.float32)[0], expected)


def test_independent_chats_batched_write_what_each_writes_alone(policy):
    """`make_generate_fn(...).many` (BFCL's path) answers chats of different lengths in one padded batch,
    greedy, with the same text each gets on its own; BFCL's runner hands every category over in one call."""
    from slca.eval.bfcl.generation import run_generation
    from slca.rollout.hf import make_generate_fn

    model, tokenizer = policy
    generate = make_generate_fn(model, tokenizer, max_new_tokens=10, batch_size=2)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    chats = [
        ([{"role": "user", "content": "Weather in Lima?"}], tools),
        ([{"role": "user", "content": "What is the weather like in Oslo and in Quito today?"}], tools),
        ([{"role": "user", "content": "Hi"}], None),
    ]
    assert generate.many(chats) == [generate(messages, tools) for messages, tools in chats]
    batches = []

    class Counting:
        def __call__(self, messages, tools):
            return generate(messages, tools)

        def many(self, chats):
            batches.append(len(chats))
            return generate.many(chats)

    outcome = run_generation(Counting(), categories=("simple_python", "multiple"), limit=3)
    assert batches == [6]  # every category's entries in one call
    assert [row["id"] for row in outcome["results"]["multiple"]] == ["multiple_0", "multiple_1", "multiple_2"]


def test_rows_closed_mid_turn_leave_the_batch_and_come_back_with_their_cache(policy, monkeypatch):
    """Parking closed rows changes no number: after a turn the cache holds, on every real slot, the keys and
    values it holds when closed rows ride along on masked pads, with the same mask; the next turn agrees."""
    model, tokenizer = policy
    tasks = [single_task(0, "test"), single_task(3, "test")]
    suffix = tokenizer("\n<tool_response>\n{\"ok\": true}\n</tool_response>", add_special_tokens=False)["input_ids"]

    def two_turns(park: bool):
        generator = CachedTurnGenerator(model, tokenizer)
        if not park:
            monkeypatch.setattr(generator, "_regatherable", lambda batch: False)
        episodes = new_episodes(tasks, tokenizer, 3)
        first = generator.generate(episodes, [2, 9, 5, 12, 1, 7], 0)
        batch = generator._batch
        state = (batch.mask.clone(), [(layer.keys.clone(), layer.values.clone()) for layer in batch.cache.layers])
        for episode, turn in zip(episodes, first, strict=True):
            episode.append(turn.ids, True)
            episode.append(suffix[: 2 + episode.sample_idx], False)
        second = generator.generate(episodes, [6] * 6, 1)
        return generator.parked_rows, first, second, state

    parked, first, second, (mask, layers) = two_turns(True)
    unparked, first_ref, second_ref, (mask_ref, layers_ref) = two_turns(False)
    assert parked >= 3 and unparked == 0
    assert [t.ids for t in first] == [t.ids for t in first_ref]
    torch.testing.assert_close(mask, mask_ref)
    real = mask.bool()
    for (keys, values), (keys_ref, values_ref) in zip(layers, layers_ref, strict=True):
        torch.testing.assert_close(keys.transpose(1, 2)[real], keys_ref.transpose(1, 2)[real])
        torch.testing.assert_close(values.transpose(1, 2)[real], values_ref.transpose(1, 2)[real])
    assert [t.ids for t in second] == [t.ids for t in second_ref]


def test_rows_of_unlike_length_go_one_at_a_time_and_write_what_the_padded_batch_writes(policy):
    """Prompts and tool results of very unlike length are fed one row at a time (no padding computed): the
    same turns as `generate` over whole sequences, and the same cache, slot for slot, as one padded batch."""
    model, tokenizer = policy
    tasks = [single_task(0, "test"), parallel_task(1, "test"), no_call_task(2, "test")]
    result = '\n<tool_response>\n{"city": "Lima", "forecast": [' + ", ".join(str(t) for t in range(40)) + "]}"
    suffix = tokenizer(result + "\n</tool_response>", add_special_tokens=False)["input_ids"]

    def two_rounds(generator):
        episodes = new_episodes(tasks, tokenizer, 2)
        first = generator.generate(episodes, [3, 8, 5, 2, 6, 4], 0)
        for episode, turn in zip(episodes, first, strict=True):
            episode.append(turn.ids, True)
            episode.append(suffix[: 20 + 30 * (episode.sample_idx + len(episode.prompt_ids) % 3)], False)
        second = generator.generate(episodes, [5] * 6, 1)
        return [t.ids for t in first], [t.ids for t in second]

    def cached(limit: float):
        generator = CachedTurnGenerator(model, tokenizer)
        generator.padding_limit = limit
        turns = two_rounds(generator)
        batch = generator._batch
        layers = [(layer.keys.clone(), layer.values.clone()) for layer in batch.cache.layers]
        return turns, generator.forward_tokens, batch.mask.clone(), layers

    turns, fed, mask, layers = cached(1.0)
    padded_turns, padded_fed, padded_mask, padded_layers = cached(float("inf"))
    assert turns == padded_turns == two_rounds(HFTurnGenerator(model, tokenizer))
    assert fed < padded_fed * 0.8  # the padding was not computed
    torch.testing.assert_close(mask, padded_mask)
    real = mask.bool()
    for (keys, values), (padded_keys, padded_values) in zip(layers, padded_layers, strict=True):
        torch.testing.assert_close(keys.transpose(1, 2)[real], padded_keys.transpose(1, 2)[real])
        torch.testing.assert_close(values.transpose(1, 2)[real], padded_values.transpose(1, 2)[real])


def test_a_dialogue_s_next_turn_reads_only_its_new_tokens_and_answers_as_a_fresh_read(policy):
    """`make_generate_fn`'s single chat (τ²'s agent asks once a turn with the whole conversation): a prompt
    that extends the previous prompt and answer continues from the cache; what it writes is what a
    generator that reads the whole prompt afresh writes. An unrelated chat starts over."""
    from slca.rollout.hf import make_generate_fn

    model, tokenizer = policy
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    dialogue = [{"role": "user", "content": "Weather in Lima?"}]
    reused = make_generate_fn(model, tokenizer, max_new_tokens=8)
    texts, fresh_texts, fresh_reads = [], [], 0
    for turn in range(3):
        texts.append(reused(dialogue, tools))
        fresh = make_generate_fn(model, tokenizer, max_new_tokens=8)
        fresh_texts.append(fresh(dialogue, tools))
        fresh_reads += fresh.generator.forward_tokens
        # the cache it continued holds what a fresh read of this prompt and answer holds, slot for slot
        mine, theirs = reused.generator._batch, fresh.generator._batch
        torch.testing.assert_close(mine.mask, theirs.mask)
        for layer, other in zip(mine.cache.layers, theirs.cache.layers, strict=True):
            torch.testing.assert_close(layer.keys, other.keys)
            torch.testing.assert_close(layer.values, other.values)
        dialogue = [*dialogue, {"role": "assistant", "content": texts[-1]}, {"role": "user", "content": f"And {turn}?"}]
    assert texts == fresh_texts
    assert reused.generator.forward_tokens < fresh_reads * 0.6  # each turn read only what was new
    other = [{"role": "user", "content": "Hi"}]
    assert reused(other, None) == make_generate_fn(model, tokenizer, max_new_tokens=8)(other, None)


def test_distinct_prompts_read_the_tokens_they_begin_with_once(policy):
    """Prompts of different tasks that begin alike (one system prompt) have that part read once, its cache row
    repeated for each: the turns are still what `generate` over whole sequences writes."""
    model, tokenizer = policy
    tasks = [single_task(0, "test"), single_task(3, "test"), parallel_task(1, "test")]
    episodes = new_episodes(tasks, tokenizer, 2)
    prompts = [episode.prompt_ids[:-1] for episode in episodes[::2]]
    shared = next(i for i in range(min(map(len, prompts))) if len({p[i] for p in prompts}) > 1)
    assert shared >= 16  # the system prompt and tool schemas
    generator = CachedTurnGenerator(model, tokenizer)
    generator.padding_limit = float("inf")  # the remainders as one padded batch, so the count below is exact
    generator.generate(episodes, [1] * 6, 0)  # prefill, then each row's last prompt token
    assert generator.forward_tokens == shared + 3 * max(len(p) - shared for p in prompts) + 6

    alone = CachedTurnGenerator(model, tokenizer)
    alone.min_shared_prefix = 1 << 30  # every prompt read whole
    cached = _rounds(CachedTurnGenerator(model, tokenizer), new_episodes(tasks, tokenizer, 2), tokenizer)
    assert cached == _rounds(alone, new_episodes(tasks, tokenizer, 2), tokenizer)
    assert cached == _rounds(HFTurnGenerator(model, tokenizer), new_episodes(tasks, tokenizer, 2), tokenizer)


def test_dialogues_answered_side_by_side_write_what_each_writes_alone(policy):
    """`make_generate_fn(...).turns` (τ²'s solo simulations side by side): each dialogue's turn is what a fresh
    generator writes for it alone; later turns read only what each dialogue added, also where a dialogue's
    history departs from what it read (its last answer rewritten: the stale slots are masked) and where a
    dialogue ended (it leaves the batch)."""
    from slca.rollout.hf import make_generate_fn

    model, tokenizer = policy
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    chats = {
        "lima": [{"role": "user", "content": "Weather in Lima?"}],
        "oslo": [{"role": "user", "content": "What is the weather like in Oslo and in Quito today?"}],
        "hi": [{"role": "user", "content": "Hi"}],
    }
    together = make_generate_fn(model, tokenizer, max_new_tokens=8)
    fresh_reads = 0
    for turn in range(3):
        keys = [key for key in chats if not (key == "hi" and turn == 2)]  # "hi" ends after two turns
        texts = together.turns([(key, chats[key], tools) for key in keys])
        for key, text in zip(keys, texts, strict=True):
            fresh = make_generate_fn(model, tokenizer, max_new_tokens=8)
            assert text == fresh(chats[key], tools), (turn, key)
            fresh_reads += fresh.generator.forward_tokens
            kept = "I will check." if key == "oslo" and turn == 0 else text  # oslo's history departs here
            chats[key] = [*chats[key], {"role": "assistant", "content": kept}, {"role": "user", "content": f"{turn}?"}]
    assert together.generator._batch.mask.shape[0] == 2  # the ended dialogue left the cache
    assert not together.generator._batch.mask.all()  # oslo's stale answer stays masked
    assert together.generator.forward_tokens < fresh_reads * 0.7
    with pytest.raises(ValueError, match="once a call"):
        together.turns([("lima", chats["lima"], tools), ("lima", chats["lima"], tools)])


def test_tau2_simulations_side_by_side_score_what_they_score_one_at_a_time():
    """τ²'s solo simulations run side by side through `turns` (one batch a turn, gathered across threads) get
    the turns they get run one after another, and the same report; each batch holds every simulation still
    running, in job order; an error in a batch fails the evaluation instead of hanging it."""
    from slca.eval.tau2_agent import render_tool_call
    from slca.eval.tau2_bench import evaluate_tau2, load_tau2_tasks

    tasks = {task.ticket: task for task in load_tau2_tasks("mock")}

    def gold(messages, tools):  # a task's gold action, repeated 1 to 3 times as the ticket's length says, then `done`
        ticket = messages[1]["content"]
        action = tasks[ticket].evaluation_criteria.actions[0]
        turn = sum(m["role"] == "assistant" for m in messages)
        return (
            render_tool_call(action.name, action.arguments) if turn <= len(ticket) % 3 else render_tool_call("done", {})
        )

    alone: list[tuple[str, str]] = []

    def one_at_a_time(messages, tools):
        alone.append((messages[1]["content"], gold(messages, tools)))
        return alone[-1][1]

    batches: list[list[int]] = []
    together: list[tuple[str, str]] = []

    class SideBySide:
        def __call__(self, messages, tools):
            raise AssertionError("the side-by-side path asks through turns")

        def turns(self, requests):
            batches.append([key for key, _, _ in requests])
            together.extend((messages[1]["content"], gold(messages, tools)) for _, messages, tools in requests)
            return [gold(messages, tools) for _, messages, tools in requests]

    expected = evaluate_tau2(one_at_a_time, domain="mock")
    report = evaluate_tau2(SideBySide(), domain="mock")
    assert report["tasks"] == expected["tasks"] and report["avg_reward"] > 0
    assert sorted(together) == sorted(alone)
    turns = [sum(key in batch for batch in batches) for key in range(6)]
    assert len(set(turns)) > 1  # simulations that ended left, the others went on in smaller batches
    assert batches[0] == list(range(6)) and all(batch == sorted(batch) for batch in batches)
    assert len(batches) == max(turns) and sum(turns) == len(alone)

    class Broken(SideBySide):
        def turns(self, requests):
            raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        evaluate_tau2(Broken(), domain="mock")
