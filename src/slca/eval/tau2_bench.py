"""τ²-bench evaluation: our policy as the agent in tau2's own environments, tools and evaluator.

    from slca.eval.tau2_bench import evaluate_tau2
    report = evaluate_tau2(generate_fn, domain="mock", num_trials=4)
    report["pass_hat_k"]   # {1: ..., 2: ..., 3: ..., 4: ...}  (tau2's pass^k)

Modes:
- solo (default for `mock`, and `telecom`): tasks that carry a ticket; no user simulator, the
  agent only calls tools and ends with tau2's `done` tool. Runs offline on CPU.
- conversation (`airline`, `retail`): a tau2 `UserSimulator` plays the customer through an
  OpenAI-compatible endpoint (`user_base_url`, `user_model`); the endpoint is checked first
  and an unreachable one fails with a one-line `Tau2EndpointError`. Each user-simulator request
  has `user_timeout_s` and `user_retries` (litellm's `timeout` and `num_retries`, through tau2's
  `llm_args`), and up to `user_max_concurrency` conversations run at once, as tau2's own
  `run_tasks` does; the policy still answers one turn at a time (a local model is not thread-safe).

In solo mode a policy that can answer several dialogues at once (`generate_fn.turns`, from
`slca.rollout.hf.make_generate_fn`) runs up to `batch_size` simulations side by side: each waits at
its turn until every simulation still running has asked (`TurnGather`), and their turns go to the
model as one decode batch, each row reading only what its dialogue added since its last turn.

Rewards come from `tau2.evaluator.evaluate_simulation` (EvaluationType.ALL: DB-state hash vs a
replay of the gold actions, env assertions, gold actions, communicate info — no LLM judge);
pass^k and average reward from `tau2.metrics.agent_metrics.compute_metrics`.
"""

from __future__ import annotations

import functools
import random
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

# isort: off
# tau2_agent first: it sets the offline environment that litellm reads when tau2 imports it
from slca.eval.tau2_agent import GenerateFn, TaskAwareGenerateFn, make_agent, resolve_generate_fn
from tau2.agent.llm_agent import LLMSoloAgent
from tau2.data_model.simulation import (
    AgentInfo,
    Info,
    Results,
    RewardInfo,
    SimulationRun,
    UserInfo,
)
from tau2.data_model.tasks import Task
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
from tau2.metrics.agent_metrics import compute_metrics, get_tasks_pass_hat_k
from tau2.orchestrator.orchestrator import Orchestrator
from tau2.registry import registry
from tau2.user.user_simulator import DummyUser, UserSimulator
# isort: on

SOLO_DOMAINS = ("mock", "telecom")
DEFAULT_SEED = 300  # tau2's own default
DEFAULT_MAX_STEPS = 100
DEFAULT_MAX_ERRORS = 10


class Tau2EndpointError(RuntimeError):
    """The user-simulator endpoint cannot be reached."""


# ---------------------------------------------------------------- tasks and endpoint


def load_tau2_tasks(
    domain: str,
    task_ids: list[str] | None = None,
    task_split: str | None = "base",
    solo: bool = True,
) -> list[Task]:
    """The domain's tasks (from the data shipped inside the tau2 wheel), filtered for the mode."""
    if domain not in registry.get_task_sets():
        raise ValueError(f"unknown τ²-bench domain {domain!r}; choose one of {registry.get_task_sets()}")
    split = task_split
    tasks = registry.get_tasks_loader(domain)(task_split_name=split)
    if solo:
        tasks = [t for t in tasks if LLMSoloAgent.check_valid_task(t)]
    if task_ids is not None:
        by_id = {t.id: t for t in tasks}
        missing = [i for i in task_ids if i not in by_id]
        if missing:
            mode = "solo" if solo else "conversation"
            raise ValueError(f"τ²-bench {domain} has no {mode}-mode task(s) {missing} in split {split!r}")
        tasks = [by_id[i] for i in task_ids]
    if not tasks:
        raise ValueError(f"τ²-bench {domain} has no tasks for this selection (solo={solo}, split={split!r})")
    return tasks


def check_endpoint(base_url: str, timeout_s: float = 5.0) -> None:
    """Raise `Tau2EndpointError` (one line) unless an HTTP server answers at `base_url`."""
    url = base_url.rstrip("/") + "/models"
    try:
        httpx.get(url, timeout=timeout_s)
    except (httpx.TransportError, httpx.InvalidURL) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Tau2EndpointError(
            f"τ²-bench user simulator endpoint {base_url} is unreachable ({reason}); "
            "start an OpenAI-compatible server there (e.g. vLLM) or pass another user_base_url"
        ) from None


def user_llm_args(base_url: str, api_key: str, temperature: float, timeout_s: float, retries: int) -> dict:
    """litellm arguments that reach an OpenAI-compatible server, with a timeout and retries per request."""
    return {
        "api_base": base_url.rstrip("/"),
        "api_key": api_key,
        "temperature": temperature,
        "timeout": timeout_s,
        "num_retries": retries,
    }


def litellm_model_name(model: str) -> str:
    """litellm routes `openai/<name>` to any OpenAI-compatible server; HF names keep their slash."""
    return model if model.startswith("openai/") else f"openai/{model}"


# ---------------------------------------------------------------- one simulation


def run_simulation(
    domain: str,
    task: Task,
    generate_fn: GenerateFn | TaskAwareGenerateFn,
    solo: bool,
    seed: int | None,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_errors: int = DEFAULT_MAX_ERRORS,
    user_model: str | None = None,
    user_args: dict | None = None,
) -> SimulationRun:
    """Run one task once through tau2's orchestrator and score it with tau2's evaluator."""
    env_constructor = registry.get_env_constructor(domain)
    environment = env_constructor(solo_mode=solo)
    tools = environment.get_tools()
    if solo and environment.user_tools is not None:  # solo agents also act for the user
        tools = tools + environment.get_user_tools()
    agent = make_agent(generate_fn, task, tools, environment.get_policy(), solo)
    if solo:
        user = DummyUser(instructions=str(task.user_scenario))
    else:
        user_tools = environment.get_user_tools() if environment.user_tools is not None else None
        user = UserSimulator(
            tools=user_tools,
            instructions=str(task.user_scenario),
            llm=user_model,
            llm_args=user_args,
        )
    orchestrator = Orchestrator(
        domain=domain,
        agent=agent,
        user=user,
        environment=environment,
        task=task,
        max_steps=max_steps,
        max_errors=max_errors,
        seed=seed,
        solo_mode=solo,
    )
    simulation = orchestrator.run()
    simulation.reward_info = score_simulation(domain, task, simulation, solo)
    simulation.seed = seed
    return simulation


def score_simulation(domain: str, task: Task, simulation: SimulationRun, solo: bool) -> RewardInfo:
    """tau2's reward (EvaluationType.ALL, no LLM judge) for a finished simulation.

    An env assertion that raises (e.g. it names a task the agent never created) counts as
    failed: reward 0, with the reason in `info`.
    """
    try:
        return evaluate_simulation(
            simulation=simulation,
            task=task,
            evaluation_type=EvaluationType.ALL,
            solo_mode=solo,
            domain=domain,
        )
    except Exception as exc:  # noqa: BLE001  tau2 assertion functions raise instead of failing
        return RewardInfo(reward=0.0, info={"note": f"evaluation failed: {type(exc).__name__}: {exc}"})


def one_at_a_time(generate_fn: GenerateFn, lock: threading.Lock) -> GenerateFn:
    """`generate_fn` behind `lock` (its signature kept, so a `seed` parameter is still seen)."""

    @functools.wraps(generate_fn, assigned=(), updated=())
    def generate(*args: object, **kwargs: object) -> str:
        with lock:
            return generate_fn(*args, **kwargs)

    return generate


class TurnGather:
    """Gathers the turns of simulations running in threads into one `turns` call.

    Each of the `parties` threads asks with its own key (`ask`) and leaves once its simulation ended
    (`leave`); when every thread still running waits at a turn, the last to arrive answers them all, in
    key order, so which turns share a batch does not depend on thread timing."""

    def __init__(self, turns: Callable[[list[tuple[Hashable, list[dict], list[dict]]]], list[str]], parties: int):
        self.turns, self.live = turns, parties
        self.waiting: dict[Hashable, tuple[list[dict], list[dict]]] = {}
        self.answers: dict[Hashable, str | BaseException] = {}
        self.condition = threading.Condition()

    def ask(self, key: Hashable, messages: list[dict], tools: list[dict]) -> str:
        with self.condition:
            self.waiting[key] = (messages, tools)
            self._answer_if_all_wait()
            while key not in self.answers:
                self.condition.wait()
            answer = self.answers.pop(key)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def leave(self) -> None:
        with self.condition:
            self.live -= 1
            self._answer_if_all_wait()

    def for_key(self, key: Hashable) -> GenerateFn:
        return lambda messages, tools: self.ask(key, messages, tools)

    def _answer_if_all_wait(self) -> None:
        if not self.waiting or len(self.waiting) < self.live:
            return
        requests = [(key, *self.waiting[key]) for key in sorted(self.waiting)]  # type: ignore[type-var]
        self.waiting = {}
        try:
            texts: list[str | BaseException] = list(self.turns(requests))
        except Exception as error:  # noqa: BLE001  every waiting simulation fails with it
            texts = [error] * len(requests)
        self.answers.update({key: text for (key, _, _), text in zip(requests, texts, strict=True)})
        self.condition.notify_all()


# ---------------------------------------------------------------- the benchmark


def trial_seeds(seed: int, num_trials: int) -> list[int]:
    """One seed per trial, drawn the way tau2's `run_tasks` draws them."""
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(num_trials)]


def _results(
    domain: str,
    tasks: list[Task],
    sims: list[SimulationRun],
    num_trials: int,
    max_steps: int,
    max_errors: int,
    seed: int,
    solo: bool,
    user_model: str | None,
) -> Results:
    env_info = registry.get_env_constructor(domain)(solo_mode=solo).get_info()
    info = Info(
        git_commit="",
        num_trials=num_trials,
        max_steps=max_steps,
        max_errors=max_errors,
        user_info=UserInfo(implementation="dummy_user" if solo else "user_simulator", llm=user_model),
        agent_info=AgentInfo(implementation="slca_policy_solo" if solo else "slca_policy"),
        environment_info=env_info,
        seed=seed,
    )
    return Results(info=info, tasks=tasks, simulations=sims)


def _save_results(results: Results, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(results.model_dump_json(indent=2))
    tmp.replace(path)


def evaluate_tau2(
    generate_fn: GenerateFn | TaskAwareGenerateFn,
    domain: str = "mock",
    num_trials: int = 1,
    task_ids: list[str] | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    seed: int = DEFAULT_SEED,
    max_errors: int = DEFAULT_MAX_ERRORS,
    task_split: str | None = "base",
    solo: bool | None = None,
    user_base_url: str | None = None,
    user_model: str | None = None,
    user_api_key: str = "EMPTY",
    user_temperature: float = 0.0,
    user_timeout_s: float = 30.0,
    user_retries: int = 2,
    user_max_concurrency: int = 1,
    save_to: str | Path | None = None,
    batch_size: int = 32,
) -> dict:
    """Run every selected task `num_trials` times and report tau2's rewards and pass^k.

    Returns {"domain", "mode", "num_tasks", "num_trials", "avg_reward",
    "pass_hat_k": {k: value for k in 1..num_trials}, "metrics": flat floats for logging,
    "tasks": {task_id: {"rewards", "termination", "pass_hat_k"}}}.
    `save_to` writes tau2's `Results` JSON (readable by `tau2 view`). In solo mode a `generate_fn` with
    a `turns` method answers up to `batch_size` simulations' turns as one batch.
    """
    if min(num_trials, max_steps, max_errors, user_max_concurrency, batch_size) < 1:
        raise ValueError("num_trials, max_steps, max_errors, user_max_concurrency and batch_size must all be >= 1")
    solo = domain in SOLO_DOMAINS if solo is None else solo
    user_args = None
    if not solo:
        if not user_base_url or not user_model:
            raise ValueError(
                f"τ²-bench {domain} in conversation mode needs a user simulator: "
                "pass user_base_url and user_model of an OpenAI-compatible endpoint"
            )
        check_endpoint(user_base_url)
        user_args = user_llm_args(user_base_url, user_api_key, user_temperature, user_timeout_s, user_retries)
        user_model = litellm_model_name(user_model)
    tasks = load_tau2_tasks(domain, task_ids=task_ids, task_split=task_split, solo=solo)
    jobs = [
        (trial, trial_seed, task) for trial, trial_seed in enumerate(trial_seeds(seed, num_trials)) for task in tasks
    ]
    workers = 1 if solo else user_max_concurrency
    policy_lock = threading.Lock()

    def simulate(job: tuple[int, int, Task], policy: GenerateFn | None = None) -> SimulationRun:
        trial, trial_seed, task = job
        if policy is None:
            policy = resolve_generate_fn(generate_fn, task)
        if workers > 1:
            policy = one_at_a_time(policy, policy_lock)
        sim = run_simulation(
            domain,
            task,
            policy,
            solo,
            trial_seed,
            max_steps,
            max_errors,
            user_model=user_model,
            user_args=user_args,
        )
        sim.trial = trial
        return sim

    turns = getattr(generate_fn, "turns", None)
    if solo and callable(turns):
        sims = [
            sim
            for start in range(0, len(jobs), batch_size)
            for sim in side_by_side(jobs[start : start + batch_size], simulate, turns)
        ]
    elif workers == 1:  # in the caller's thread: torch's grad mode and the like are per thread
        sims = [simulate(job) for job in jobs]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            sims = list(pool.map(simulate, jobs))
    results = _results(domain, tasks, sims, num_trials, max_steps, max_errors, seed, solo, user_model)
    if save_to is not None:
        _save_results(results, Path(save_to))
    return summarize(results, solo)


def side_by_side(
    jobs: list[tuple[int, int, Task]],
    simulate: Callable[[tuple[int, int, Task], GenerateFn], SimulationRun],
    turns: Callable[[list[tuple[Hashable, list[dict], list[dict]]]], list[str]],
) -> list[SimulationRun]:
    """Run `jobs` at once, one thread each, their turns gathered into `turns` calls; results in job order."""
    gather = TurnGather(turns, len(jobs))
    sims: list[SimulationRun | None] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            sims[index] = simulate(jobs[index], gather.for_key(index))
        except BaseException as error:  # noqa: BLE001  re-raised in the caller's thread
            errors.append(error)
        finally:
            gather.leave()

    threads = [threading.Thread(target=run, args=(i,), name=f"tau2-sim-{i}", daemon=True) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [sim for sim in sims if sim is not None]


def summarize(results: Results, solo: bool) -> dict:
    """Per-task rewards and tau2's pass^k / average reward for a finished `Results`."""
    metrics = compute_metrics(results)
    per_task_pass = get_tasks_pass_hat_k(results)
    tasks: dict[str, dict] = {t.id: {"rewards": [], "termination": []} for t in results.tasks}
    for sim in sorted(results.simulations, key=lambda s: s.trial or 0):
        tasks[sim.task_id]["rewards"].append(float(sim.reward_info.reward))
        tasks[sim.task_id]["termination"].append(sim.termination_reason.value)
    for task_id, row in tasks.items():
        row["pass_hat_k"] = {
            int(col.split("^")[1]): float(per_task_pass.loc[task_id, col])
            for col in per_task_pass.columns
            if col.startswith("pass^")
        }
    pass_hat_k = {int(k): float(v) for k, v in metrics.pass_hat_ks.items()}
    flat = {"avg_reward": float(metrics.avg_reward)}
    flat.update({f"pass_hat_{k}": v for k, v in pass_hat_k.items()})
    return {
        "domain": results.info.environment_info.domain_name,
        "mode": "solo" if solo else "conversation",
        "num_tasks": len(results.tasks),
        "num_trials": results.info.num_trials,
        "avg_reward": float(metrics.avg_reward),
        "pass_hat_k": pass_hat_k,
        "metrics": flat,
        "tasks": tasks,
    }
