"""A turn generator that never redoes work: one prefill per distinct prompt, the KV cache kept across turns.

`HFTurnGenerator` hands every round's whole sequences to `generate`, so a rollout of three turns reads
its prompt three times, and the G rollouts of a GRPO group read the same prompt G times. On 2 CPU cores
that re-reading is most of a rollout's cost. `CachedTurnGenerator` keeps one batched KV cache for the
episodes of a `run_episodes` call:

- **round 0**: each distinct prompt is prefilled once (all but its last token) and its cache rows are
  repeated for every episode that shares it (a GRPO group, `num_samples` > 1); the tokens every distinct
  prompt begins with (a system prompt) are read once for all of them;
- **each round**: a row is fed only what its cache lacks (`episode.sequence[cached:]`: the last token
  of the previous turn and the tool messages the engine appended), left-padded into one chunk, then
  decoded token by token until every row has met a stop token or its own budget;
- rows of finished episodes are dropped from the cache between rounds.

Padding slots stay in the cache with attention mask 0 and positions count real tokens only, so each
row sees exactly its own sequence. Sampling is temperature / top-k / top-p from one seeded generator
(temperature 0 = greedy).

Decoding on a CPU is bound by reading the weights once per step, so the generator reads them from a
**generation copy** (`GenerationCopy`) when that is cheaper: LoRA merged into the base weights (one
matmul per layer, not three) and, with `dtype="bfloat16"`, half the bytes. The copy is refreshed from
the trained model at the start of every `run_episodes` call, so RL samples from the current policy.
The KV cache grows in place (`GrowingLayer`: capacity doubles) instead of being re-concatenated every
token. `benchmarks/policy_cost.py` measures each of these.

    generator = CachedTurnGenerator(model, tokenizer, temperature=1.0, seed=0, dtype="bfloat16")
    episodes = run_episodes(generator, tasks, env_factory=env, max_turns=2, max_new_tokens=128, num_samples=4)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.cache_utils import DynamicLayer
from transformers.modeling_outputs import CausalLMOutputWithPast

from slca.rollout.chat_format import chat_format
from slca.rollout.loop import Episode, Turn, tool_suffix_ids
from slca.rollout.precision import generation_dtype

# The name transformers gives a forward's KV cache, in and out: `cache` in recent 5.x releases,
# `past_key_values` in earlier ones (5.17, say, which a GPU image may carry). Passing the other name
# is not an error there: it would be swallowed by **kwargs and the cache silently ignored.
CACHE_KWARG = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


def output_cache(out: Any) -> Any:
    """The KV cache a forward returned, under whichever name this transformers gives it."""
    return getattr(out, CACHE_KWARG, None)


@dataclass
class _Batch:
    """The cache of one `run_episodes` call: which episode each row holds and what it has read."""

    rows: list[int]  # id(episode) per cache row
    cache: Any
    mask: torch.Tensor  # (rows, slots): 1 on slots holding a real token
    cached: list[int] = field(default_factory=list)  # real tokens of each row's sequence in the cache


@dataclass
class _Parked:
    """Rows set aside mid-turn once they closed, so that the decode steps left run on the open rows only;
    their keys and values (per layer, `length` slots) go back into the batch when the turn ends."""

    rows: list[int]  # episode indices
    length: int
    kv: list[tuple[torch.Tensor, torch.Tensor]]
    mask: torch.Tensor


class GrowingLayer(DynamicLayer):
    """A DynamicLayer whose keys and values live in a buffer that doubles when full: appending a token
    writes one slot instead of copying the whole cache (`torch.cat` every step is O(length))."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self._k = self._v = None
        used = self.get_seq_length()
        need = used + key_states.shape[-2]
        if self._k is None or need > self._k.shape[-2] or self._k.shape[0] != key_states.shape[0]:
            capacity = max(need, 2 * (self._k.shape[-2] if self._k is not None else 0), 64)
            shape = (*key_states.shape[:-2], capacity, key_states.shape[-1])
            k, v = key_states.new_empty(shape), value_states.new_empty(shape)
            if used:
                assert self.keys is not None and self.values is not None  # the layer holds `used` tokens
                k[..., :used, :], v[..., :used, :] = self.keys, self.values
            self._k, self._v = k, v
        self._k[..., used:need, :] = key_states
        self._v[..., used:need, :] = value_states
        self.keys, self.values = self._k[..., :need, :], self._v[..., :need, :]
        return self.keys, self.values

    def keep_first(self, n: int) -> None:
        """Forget every slot after the first `n` (the buffer stays; the next update writes from slot n)."""
        assert self._k is not None and self._v is not None  # set by update()
        self.keys, self.values = self._k[..., :n, :], self._v[..., :n, :]

    def replace(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Hold exactly these keys and values (rows regathered after a decode ran on part of them)."""
        self._k, self._v = keys, values
        self.keys, self.values = keys, values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            assert self._k is not None and self._v is not None and self.keys is not None  # set by update()
            self._k, self._v = self._k[indices], self._v[indices]
            used = self.keys.shape[-2]
            self.keys, self.values = self._k[..., :used, :], self._v[..., :used, :]


def _sdpa_fp32(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, Any]:
    """SDPA in fp32 for bf16 weights: on CPU the bf16 attention kernel costs 4x the fp32 one at decode
    (measured: 229 vs 50 ms a step at 32 rows), the projections around it keep bf16's halved reads.
    A decode step (one query token) is two small matmuls and a softmax (`_decode_attention`): always for
    bf16 weights; for fp32 ones where the rows are padded (SDPA's CPU kernel with a mask took 118 ms a
    SmolLM2 step at 6 rows, the matmuls 96; without a mask SDPA is the faster, 60 against 68 ms at 1 row)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    dtype, query, key, value = query.dtype, query.float(), key.float(), value.float()
    decode = query.shape[2] == 1 and kwargs.get("dropout", 0.0) == 0.0 and kwargs.get("position_bias") is None
    if decode and (dtype != torch.float32 or attention_mask is not None):
        return _decode_attention(query, key, value, attention_mask, kwargs.get("scaling"), dtype)
    out, weights = sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    return out.to(dtype), weights


def _decode_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None,
    out_dtype: torch.dtype,
) -> tuple[torch.Tensor, None]:
    """Attention of one query token per row as plain matmuls: SDPA's CPU flash kernel takes ~0.7 ms a layer
    for it (measured on SmolLM2 at 8 rows, a fifth of a decode step). Grouped heads read their shared keys
    without copying them. query (B, H, 1, D), key/value (B, KVH, L, D), mask (B, 1, 1, L) bool or additive;
    returns (B, 1, H, D) as SDPA's wrapper does."""
    batch, heads, _, dim = query.shape
    groups = key.shape[1]
    q = query.reshape(batch, groups, heads // groups, dim)
    scores = torch.matmul(q, key.transpose(-1, -2)) * (scaling if scaling is not None else dim**-0.5)
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask[:, :, :, -key.shape[2] :], float("-inf"))
        else:
            scores = scores + attention_mask[:, :, :, -key.shape[2] :]
    out = torch.matmul(torch.softmax(scores, dim=-1), value)  # (B, KVH, n_rep, D)
    return out.reshape(batch, 1, heads, dim).to(out_dtype), None


def _register_attention() -> str:
    """Register the fp32 attention and, as its padding mask, SDPA's (a name without one gets no mask at all:
    left-padded rows would then attend to their padding)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register("slca_sdpa_fp32", _sdpa_fp32)
    AttentionMaskInterface.register("slca_sdpa_fp32", sdpa_mask)
    return "slca_sdpa_fp32"


class GenerationCopy:
    """The weights generation reads: the model itself when it is plain and already in `dtype`, else a
    copy with LoRA merged and cast to `dtype`, refreshed from the model by `refresh()` (built once and
    never refreshed with `follow=False`: evaluation, whose weights do not change)."""

    def __init__(self, model: Any, dtype: str = "float32", *, follow: bool = True) -> None:
        self.source, self.dtype, self.follow = model, getattr(torch, generation_dtype(dtype)), follow
        self.lora = [
            (name, module)
            for name, module in model.named_modules()
            if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer")
        ]
        same_dtype = next(model.parameters()).dtype == self.dtype
        self.model = model if same_dtype and not self.lora else None

    def refresh(self) -> Any:
        if self.model is self.source:
            return self.model
        if self.model is None:
            plain = copy.deepcopy(self.source)
            _own_forwards(plain)
            if self.lora:
                plain = plain.merge_and_unload()
            self.model = plain.to(self.dtype).eval()
            if self._device().type == "cpu":
                self.model.set_attn_implementation(_register_attention())
            for parameter in self.model.parameters():
                parameter.requires_grad_(False)
            return self.model
        if not self.follow:
            return self.model
        with torch.no_grad():
            if self.lora:  # only the adapted layers change under LoRA
                targets = dict(self.model.named_modules())
                for name, module in self.lora:
                    merged = module.base_layer.weight.detach().clone()
                    for adapter in module.active_adapters:
                        if adapter in module.lora_A:
                            merged += module.get_delta_weight(adapter)
                    targets[_plain_name(name)].weight.copy_(merged)
            else:
                for mine, theirs in zip(self.model.parameters(), self.source.parameters(), strict=True):
                    mine.copy_(theirs.detach())
        return self.model

    def _device(self) -> torch.device:
        return next(self.source.parameters()).device


def _own_forwards(copied: Any) -> None:
    """Give every module of a deep copy its class's `forward` back.

    A forward patched onto an instance survives `deepcopy` as a method bound to the copy, but the function
    it wraps is shared, and with it whatever the patch closed over. TRL's GRPO trainer patches its policy
    this way (`trl.trainer.utils.add_fused_lm_head`: `original_forward = model.forward`, then
    `model.forward = MethodType(_fused_forward, model)`), so a copy of a TRL policy kept calling the
    *original* model: the un-merged LoRA layers in the training precision, whatever the copy held. A
    generation copy needs none of those patches (they only add the fused loss head)."""
    for module in copied.modules():
        module.__dict__.pop("forward", None)


def _plain_name(peft_name: str) -> str:
    """A LoRA layer's name in the merged model (PEFT nests the model under `base_model.model.`)."""
    prefix = "base_model.model."
    return peft_name.removeprefix(prefix)


def sample_next(
    logits: torch.Tensor, temperature: float, top_k: int, top_p: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Next token per row: argmax at temperature 0, else a draw after temperature, top-k and top-p."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits.float() / temperature
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        ordered, order = torch.sort(logits, descending=True, dim=-1)
        probs = torch.softmax(ordered, dim=-1)
        drop = probs.cumsum(dim=-1) - probs > top_p  # keep the smallest prefix whose mass reaches top_p
        logits = logits.scatter(-1, order, ordered.masked_fill(drop, float("-inf")))
    # inverse CDF with one uniform draw a row: torch.multinomial draws an exponential per vocabulary entry
    # (measured 7.8 ms a step at 8 rows of SmolLM2's 49,152, on one thread), this reads the CDF once
    cdf = torch.softmax(logits, dim=-1).cumsum(dim=-1)
    draw = torch.rand((logits.shape[0], 1), generator=generator, dtype=cdf.dtype) * cdf[:, -1:]
    return torch.searchsorted(cdf, draw, right=True).squeeze(-1).clamp_(max=logits.shape[-1] - 1)


class CachedTurnGenerator:
    """Turns from a causal LM with a KV cache kept across the rounds of one `run_episodes` call.

    A `TurnGenerator` (see `slca.rollout.loop`): same stop set, budgets and context limit as
    `HFTurnGenerator`. One instance serves one `run_episodes` call at a time; a round whose
    episodes are not the live subset of the previous round's starts a new cache.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 0.0,
        seed: int = 0,
        top_k: int = 0,
        top_p: float = 1.0,
        dtype: str = "float32",
        follow: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.temperature, self.seed, self.top_k, self.top_p = temperature, seed, top_k or 0, top_p
        self.weights = GenerationCopy(model, dtype, follow=follow)
        self.model: Any = self.weights.model  # None until refresh() builds the copy (round 0)
        self.eos_token_ids = set(chat_format(tokenizer, model).stop_ids)
        self.context_limit = int(getattr(model.config, "max_position_embeddings", None) or 1 << 30)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_token_ids)
        self._batch: _Batch | None = None
        self.calls = 0  # run_episodes calls served: each draws from its own seeded stream
        self.forward_tokens = 0  # real + padding tokens fed to the model (for benchmarks)
        self.parked_rows = 0  # rows that left a decode batch once closed (for tests and benchmarks)
        # rows of new tokens go one at a time when a left-padded batch of them would hold more than this many
        # times their real tokens (and they average 16 or more)
        self.padding_limit = 1.5
        # distinct prompts that begin with at least this many equal tokens have them read once
        self.min_shared_prefix = 16

    # -- the TurnGenerator protocol -------------------------------------------------------------
    def tool_suffix(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        return tool_suffix_ids(self.tokenizer, messages)

    def any_live(self, local_live: bool) -> bool | None:
        return None

    @torch.no_grad()
    def generate(self, episodes: Sequence[Episode], budgets: Sequence[int], round_index: int) -> list[Turn]:
        if round_index == 0:
            self.model = self.weights.refresh()
            self.calls += 1
        was_training = self.model.training
        self.model.eval()
        try:
            batch = self._batch_for(episodes, round_index)
            return self._decode(batch, episodes, budgets, round_index)
        finally:
            if was_training:
                self.model.train()

    def adopt_rows(self, pairs: Sequence[tuple[Episode, Episode]]) -> int:
        """Let each new episode of `pairs` start from the cache row of its held one, as far as their token
        sequences agree (a dialogue's next turn re-rendered whole); the rows of held episodes not named
        leave the cache. Their first `generate` call must then pass a round_index > 0. Returns the tokens
        reused, 0 when nothing could be (a held episode has no row, or some pair shares nothing): the cache
        is then untouched; start the episodes afresh at round 0.

        A row whose new sequence departs from what it read keeps the slots of the shared part: the slots
        after it are masked, never read again (the next tokens get the positions after the shared part)."""
        batch = self._batch
        if batch is None or not pairs or not batch.cache.layers or not self._regatherable(batch):
            return 0
        slot = {key: i for i, key in enumerate(batch.rows)}
        keeps: list[tuple[int, int]] = []
        for held, episode in pairs:
            i = slot.get(id(held))
            if i is None:
                return 0
            known, new = held.sequence[: batch.cached[i]], episode.sequence
            shared = _common_length(known, new)
            keep = min(shared, len(new) - 1)  # the last token is fed: its logits start the turn
            if keep < 1:
                return 0
            keeps.append((i, keep))
        index = [i for i, _ in keeps]
        mask = batch.mask[index].clone()
        for row, (i, keep) in enumerate(keeps):
            if keep < batch.cached[i]:
                mask[row] *= (mask[row].cumsum(0) <= keep).to(mask.dtype)
        if index != list(range(len(batch.rows))):
            batch.cache.batch_select_indices(torch.tensor(index, device=mask.device))
        read = mask.any(dim=0).nonzero()
        width = int(read[-1]) + 1 if len(read) else 0
        if width < mask.shape[1]:  # trailing slots no row reads any more
            for layer in batch.cache.layers:
                layer.keep_first(width)
            mask = mask[:, :width]
        batch.mask = mask
        batch.rows = [id(episode) for _, episode in pairs]
        batch.cached = [keep for _, keep in keeps]
        return sum(keep for _, keep in keeps)

    # -- internals ---------------------------------------------------------------------------------
    def _device(self) -> torch.device:
        return next(self.model.parameters()).device

    def _forward(self, batch: _Batch, ids: torch.Tensor, chunk_mask: torch.Tensor, positions: torch.Tensor) -> Any:
        batch.mask = torch.cat([batch.mask, chunk_mask], dim=1)
        self.forward_tokens += ids.numel()
        out = self.model(
            input_ids=ids,
            attention_mask=batch.mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{CACHE_KWARG: batch.cache},
        )
        batch.cache = output_cache(out)
        return out.logits[:, -1, :]

    def _batch_for(self, episodes: Sequence[Episode], round_index: int) -> _Batch:
        keys = [id(e) for e in episodes]
        batch = self._batch
        if round_index > 0 and batch is not None and set(keys) <= set(batch.rows):
            keep = [batch.rows.index(key) for key in keys]
            if keep != list(range(len(batch.rows))):
                index = torch.tensor(keep, device=self._device())
                batch.cache.batch_select_indices(index)
                batch.mask = batch.mask[index]
                batch.rows = keys
                batch.cached = [batch.cached[i] for i in keep]
            return batch
        self._batch = self._prefill(episodes)
        return self._batch

    def _prefill(self, episodes: Sequence[Episode]) -> _Batch:
        """One forward over the distinct prompts (all but their last token), repeated per episode."""
        from transformers import DynamicCache

        distinct: dict[tuple[int, ...], int] = {}
        for episode in episodes:
            distinct.setdefault(tuple(episode.prompt_ids[:-1]), len(distinct))
        prompts = list(distinct)
        device = self._device()
        cache = DynamicCache()
        cache.layer_class_to_replicate = GrowingLayer
        # the tokens all distinct prompts begin with are read once, their cache row repeated for each prompt
        # (every remainder keeps at least one token)
        shared = min(_common_length(*prompts), min(len(p) for p in prompts) - 1) if len(prompts) > 1 else 0
        if shared < self.min_shared_prefix:
            shared = 0
        mask = torch.zeros((1 if shared else len(prompts), 0), dtype=torch.long, device=device)
        batch = _Batch(rows=[], cache=cache, mask=mask)
        if shared:
            self._feed(batch, [list(prompts[0][:shared])], [0])
            spread = torch.zeros(len(prompts), dtype=torch.long, device=device)
            batch.cache.batch_select_indices(spread)
            batch.mask = batch.mask[spread]
        width = max(len(p) for p in prompts) - shared
        if width:
            self._feed(batch, [list(p[shared:]) for p in prompts], [shared] * len(prompts))
        repeat = torch.tensor([distinct[tuple(e.prompt_ids[:-1])] for e in episodes], device=device)
        if batch.cache.get_seq_length() > 0:
            batch.cache.batch_select_indices(repeat)
        batch.mask = batch.mask[repeat]
        batch.rows = [id(e) for e in episodes]
        batch.cached = [len(e.prompt_ids) - 1 for e in episodes]
        return batch

    def _feed(self, batch: _Batch, rows: Sequence[Sequence[int]], start: Sequence[int]) -> torch.Tensor:
        """Run each row's new tokens (`start` = the position of its first) through the model; the last
        position's logits per row. Rows of like length go as one left-padded batch; rows of very unlike
        length (prompts, tool results) one at a time, so that padding is neither computed nor attended to:
        32 prompts of 262 tokens on average, padded to 597, took 26 s as one batch."""
        lengths = [len(row) for row in rows]
        width, real = max(lengths), sum(lengths)
        one_by_one = len(rows) > 1 and real >= 16 * len(rows) and len(rows) * width > self.padding_limit * real
        if not one_by_one or not self._regatherable(batch):
            ids, mask, positions = self._left_pad(rows, self._device(), start=start)
            return self._forward(batch, ids, mask, positions)
        return self._forward_rows(batch, rows, start, width)

    def _forward_rows(
        self, batch: _Batch, rows: Sequence[Sequence[int]], start: Sequence[int], width: int
    ) -> torch.Tensor:
        """`_feed` one row at a time: each row reads its own slice of the cache; the new keys and values are
        laid out as the left-padded batch lays them out (the last `len(row)` of `width` new slots)."""
        from transformers import DynamicCache

        device, held = self._device(), batch.mask.shape[1]
        logits: list[torch.Tensor] = []
        new_kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        chunk_mask = torch.zeros((len(rows), width), dtype=batch.mask.dtype, device=device)
        for i, row in enumerate(rows):
            own = DynamicCache()
            for index, layer in enumerate(batch.cache.layers):
                own.update(layer.keys[i : i + 1], layer.values[i : i + 1], index)
            n = len(row)
            single = _Batch(rows=[], cache=own, mask=batch.mask[i : i + 1])
            ones = torch.ones((1, n), dtype=batch.mask.dtype, device=device)
            positions = torch.arange(start[i], start[i] + n, device=device)[None]
            logits.append(self._forward(single, torch.tensor([list(row)], device=device), ones, positions))
            for index, layer in enumerate(single.cache.layers):
                if len(new_kv) <= index:
                    shape = (len(rows), layer.keys.shape[1], held + width, layer.keys.shape[-1])
                    keys, values = layer.keys.new_zeros(shape), layer.values.new_zeros(shape)
                    if held:
                        keys[:, :, :held] = batch.cache.layers[index].keys
                        values[:, :, :held] = batch.cache.layers[index].values
                    new_kv.append((keys, values))
                keys, values = new_kv[index]
                keys[i, :, held + width - n :] = layer.keys[0, :, held:]
                values[i, :, held + width - n :] = layer.values[0, :, held:]
            chunk_mask[i, width - n :] = 1
        cache = DynamicCache()
        cache.layer_class_to_replicate = GrowingLayer
        for index, (keys, values) in enumerate(new_kv):
            cache.update(keys, values, index)
        batch.cache = cache
        batch.mask = torch.cat([batch.mask, chunk_mask], dim=1)
        return torch.cat(logits, dim=0)

    def _left_pad(
        self, rows: Sequence[Sequence[int]], device: torch.device, start: Sequence[int] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        positions = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            if row:
                first = start[i] if start is not None else 0
                ids[i, width - len(row) :] = torch.tensor(list(row))
                mask[i, width - len(row) :] = 1
                positions[i, width - len(row) :] = torch.arange(first, first + len(row))
        return ids.to(device), mask.to(device), positions.to(device)

    def _decode(
        self, batch: _Batch, episodes: Sequence[Episode], budgets: Sequence[int], round_index: int
    ) -> list[Turn]:
        device = self._device()
        pending = [e.sequence[batch.cached[i] :] for i, e in enumerate(episodes)]
        if any(not p for p in pending):
            raise RuntimeError("an episode has no new token since its last turn: the cache is out of step")
        logits = self._feed(batch, pending, batch.cached)
        batch.cached = [c + len(p) for c, p in zip(batch.cached, pending, strict=True)]
        stream = (self.seed * 1_000_003 + (self.calls - 1) * 7919 + round_index * 1009) % (1 << 63)
        generator = torch.Generator(device="cpu").manual_seed(stream)
        turns: list[list[int]] = [[] for _ in episodes]
        open_rows = [budget > 0 for budget in budgets]
        step_positions = torch.tensor(batch.cached, dtype=torch.long)
        active = list(range(len(episodes)))  # the rows the decode batch holds, in its order
        parked: list[_Parked] = []
        for _ in range(max(budgets)):
            tokens = sample_next(logits.cpu(), self.temperature, self.top_k, self.top_p, generator)
            for i, token in zip(active, tokens.tolist(), strict=True):
                if open_rows[i]:
                    turns[i].append(token)
                    if token in self.eos_token_ids or len(turns[i]) >= budgets[i]:
                        open_rows[i] = False
            if not any(open_rows):
                break
            closed = [k for k, i in enumerate(active) if not open_rows[i]]
            if closed and len(closed) * 4 >= len(active) and self._regatherable(batch):
                # a step costs about a row's share of the batch (6 ms a row at 16-32 rows of SmolLM2):
                # closed rows leave the batch instead of riding along on masked pads
                parked.append(self._park(batch, closed, [active[k] for k in closed]))
                self.parked_rows += len(closed)
                keep = [k for k, i in enumerate(active) if open_rows[i]]
                index = torch.tensor(keep, device=device)
                batch.cache.batch_select_indices(index)
                batch.mask = batch.mask[index]
                active = [active[k] for k in keep]
            # feed each open row its new token; closed rows a masked pad (their last token waits for the next round)
            feed = torch.tensor([[turns[i][-1] if open_rows[i] else self.pad_id] for i in active])
            live = torch.tensor([[1 if open_rows[i] else 0] for i in active])
            positions = step_positions[active][:, None]
            logits = self._forward(batch, feed.to(device), live.to(device), positions.to(device))
            step_positions[active] += live[:, 0]
            for i in active:
                batch.cached[i] += int(open_rows[i])
        if parked:
            self._unpark(batch, active, parked, len(episodes))
        return [Turn(turn) for turn in turns]

    @staticmethod
    def _regatherable(batch: _Batch) -> bool:
        """Whether rows can be taken out of and put back into the cache (its layers are all `GrowingLayer`s;
        a cache that holds nothing yet has none)."""
        return all(isinstance(layer, GrowingLayer) for layer in batch.cache.layers)

    @staticmethod
    def _park(batch: _Batch, positions: Sequence[int], rows: Sequence[int]) -> _Parked:
        index = torch.tensor(list(positions), device=batch.mask.device)
        kv = [(layer.keys[index], layer.values[index]) for layer in batch.cache.layers]
        return _Parked(rows=list(rows), length=batch.mask.shape[1], kv=kv, mask=batch.mask[index])

    @staticmethod
    def _unpark(batch: _Batch, active: Sequence[int], parked: Sequence[_Parked], n_rows: int) -> None:
        """Put parked rows back in episode order; the slots they skipped are masked (zero keys, never read)."""
        length = batch.mask.shape[1]
        mask = batch.mask.new_zeros((n_rows, length))
        mask[list(active)] = batch.mask
        for part in parked:
            mask[part.rows, : part.length] = part.mask
        for index, layer in enumerate(batch.cache.layers):
            keys = layer.keys.new_zeros((n_rows, *layer.keys.shape[1:]))
            values = layer.values.new_zeros((n_rows, *layer.values.shape[1:]))
            keys[list(active)], values[list(active)] = layer.keys, layer.values
            for part in parked:
                part_keys, part_values = part.kv[index]
                keys[part.rows, :, : part.length], values[part.rows, :, : part.length] = part_keys, part_values
            layer.replace(keys, values)
        batch.mask = mask


def _common_length(*sequences: Sequence[int]) -> int:
    """How many leading tokens all `sequences` share."""
    shortest = min(len(seq) for seq in sequences)
    for i in range(shortest):
        token = sequences[0][i]
        if any(seq[i] != token for seq in sequences[1:]):
            return i
    return shortest


def turn_generator(
    model: Any, tokenizer: Any, *, temperature: float = 0.0, seed: int = 0, dtype: str = "float32"
) -> Any:
    """The cached generator for a causal LM (anything with input embeddings to run forward passes on);
    `HFTurnGenerator` for a policy that only offers `generate` (e.g. a scripted stand-in)."""
    if callable(getattr(model, "get_input_embeddings", None)):
        return CachedTurnGenerator(model, tokenizer, temperature=temperature, seed=seed, dtype=dtype, follow=False)
    from slca.rollout.loop import HFTurnGenerator

    return HFTurnGenerator(model, tokenizer, temperature=temperature, seed=seed)
