"""τ²-bench adapter: scripted agents scored by tau2's own evaluator, offline (no LLM calls)."""

from __future__ import annotations

import json
import socket

import pytest

pytest.importorskip("tau2", reason="τ²-bench needs the optional tau2 extra")
# isort: off
# slca's adapter first: it sets the offline environment before tau2 imports litellm
from slca.eval.tau2_agent import (
    DoNothingAgent,
    GoldActionAgent,
    render_tool_call,
    text_to_assistant_message,
    to_chat_messages,
)
from slca.eval.tau2_bench import Tau2EndpointError, evaluate_tau2, load_tau2_tasks, run_simulation
from tau2.data_model.message import AssistantMessage, MultiToolMessage, ToolMessage
from tau2.data_model.simulation import Results
# isort: on

SOLVABLE_SOLO = [
    "create_task_1",
    "create_task_1_with_env_assertions",
    "update_task_1",
    "update_task_with_initialization_actions",
    "impossible_task_1",
]


@pytest.fixture(autouse=True)
def no_llm_calls(monkeypatch):
    """Any litellm call made by tau2 fails the test."""
    from tau2.utils import llm_utils

    def forbidden(*args, **kwargs):
        raise AssertionError("tau2 tried to call an LLM")

    monkeypatch.setattr(llm_utils, "completion", forbidden)


def test_mock_solo_tasks_load_from_the_wheel():
    ids = [t.id for t in load_tau2_tasks("mock", solo=True)]
    assert ids == [
        "create_task_1",
        "create_task_1_with_env_assertions",
        "update_task_1",
        "update_task_with_initialization_data",
        "update_task_with_initialization_actions",
        "impossible_task_1",
    ]


def test_gold_action_agent_scores_one_on_every_solvable_mock_task():
    report = evaluate_tau2(GoldActionAgent(), domain="mock", task_ids=SOLVABLE_SOLO, num_trials=2)
    assert report["mode"] == "solo"
    for task_id in SOLVABLE_SOLO:
        assert report["tasks"][task_id]["rewards"] == [1.0, 1.0]
        assert report["tasks"][task_id]["termination"] == ["agent_stop", "agent_stop"]
    assert report["avg_reward"] == 1.0
    assert report["pass_hat_k"] == {1: 1.0, 2: 1.0}


def test_communicate_only_task_is_unwinnable_without_text():
    # Its reward basis includes COMMUNICATE, which a solo agent (tool calls only) cannot satisfy.
    report = evaluate_tau2(GoldActionAgent(), task_ids=["update_task_with_initialization_data"])
    assert report["tasks"]["update_task_with_initialization_data"]["rewards"] == [0.0]


def test_do_nothing_agent_scores_zero():
    report = evaluate_tau2(DoNothingAgent(), domain="mock")
    assert report["num_tasks"] == 6
    assert all(row["rewards"] == [0.0] for row in report["tasks"].values())
    assert report["avg_reward"] == 0.0 and report["pass_hat_k"] == {1: 0.0}


class FlakyAgent:
    """Gold on the first `good` simulations, then does nothing."""

    def __init__(self, good: int):
        self.good, self.calls = good, 0

    def for_task(self, task):
        self.calls += 1
        return GoldActionAgent().for_task(task) if self.calls <= self.good else DoNothingAgent()


def test_pass_hat_k_matches_tau2_definition():
    # 2 successes out of 3 trials: pass^1 = 2/3, pass^2 = C(2,2)/C(3,2) = 1/3, pass^3 = 0.
    report = evaluate_tau2(FlakyAgent(good=2), task_ids=["update_task_1"], num_trials=3)
    assert report["tasks"]["update_task_1"]["rewards"] == [1.0, 1.0, 0.0]
    assert report["pass_hat_k"] == pytest.approx({1: 2 / 3, 2: 1 / 3, 3: 0.0})
    assert report["avg_reward"] == pytest.approx(2 / 3)
    assert report["metrics"]["pass_hat_2"] == pytest.approx(1 / 3)


def test_tool_call_text_round_trips_into_tau2_tool_calls():
    text = (
        "I'll create it now.\n"
        + render_tool_call("create_task", {"user_id": "user_1", "title": "Important Meeting"})
        + '\n<tool_call>\n{"name": "get_users", "arguments": "{}"}\n</tool_call>'
        + "\n<tool_call>{not json}</tool_call>"
    )
    msg = text_to_assistant_message(text, turn=3)
    assert msg.content is None
    assert [(tc.id, tc.name, tc.arguments) for tc in msg.tool_calls] == [
        ("call_3_0", "create_task", {"user_id": "user_1", "title": "Important Meeting"}),
        ("call_3_1", "get_users", {}),
    ]
    plain = text_to_assistant_message("Your task is created.", turn=4)
    assert plain.content == "Your task is created." and plain.tool_calls is None
    assert text_to_assistant_message("  ", turn=5).has_text_content()  # tau2 rejects empty messages


def test_tau2_messages_convert_to_chat_messages():
    multi = MultiToolMessage(
        role="tool",
        tool_messages=[
            ToolMessage(id="a", role="tool", content='{"x": 1}'),
            ToolMessage(id="b", role="tool", content="ok"),
        ],
    )
    assert to_chat_messages(multi) == [
        {"role": "tool", "content": '{"x": 1}'},
        {"role": "tool", "content": "ok"},
    ]
    history = text_to_assistant_message(render_tool_call("get_users", {}), turn=0)
    assert to_chat_messages(history) == [{"role": "assistant", "content": render_tool_call("get_users", {})}]


class TextPolicy:
    """A text-only policy: writes the create call (with prose around it), then `done`."""

    def __init__(self):
        self.seen: list[list[dict]] = []
        self.tool_names: list[str] = []

    def __call__(self, messages, tools):
        self.seen.append(messages)
        self.tool_names = [t["function"]["name"] for t in tools]
        if messages[-1]["role"] == "tool":
            return render_tool_call("done", {})
        call = render_tool_call("create_task", {"user_id": "user_1", "title": "Important Meeting"})
        return f"Creating the task.\n{call}"


def test_text_policy_goes_through_adapter_and_scores_one():
    policy = TextPolicy()
    report = evaluate_tau2(policy, task_ids=["create_task_1"])
    assert report["tasks"]["create_task_1"]["rewards"] == [1.0]
    assert set(policy.tool_names) == {
        "create_task",
        "get_users",
        "update_task_status",
        "transfer_to_human_agents",
        "done",
    }
    first, second = policy.seen
    assert [m["role"] for m in first] == ["system", "user"]
    assert "Important Meeting" in first[1]["content"]  # the ticket
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["content"].startswith("Creating the task.")  # raw text kept verbatim
    assert json.loads(second[3]["content"])["title"] == "Important Meeting"


def test_seed_reaches_generate_fn_and_is_reproducible():
    def seeded_runs():
        seeds = []

        def policy(messages, tools, seed):
            seeds.append(seed)
            return render_tool_call("done", {})

        evaluate_tau2(policy, task_ids=["create_task_1"], num_trials=2, seed=7)
        return seeds

    first = seeded_runs()
    assert len(first) == 2 and first[0] != first[1]
    assert seeded_runs() == first


def test_results_file_is_tau2_format(tmp_path):
    path = tmp_path / "tau2" / "results.json"
    evaluate_tau2(GoldActionAgent(), task_ids=["update_task_1"], save_to=path)
    results = Results.load(path)
    assert [s.reward_info.reward for s in results.simulations] == [1.0]


def test_conversation_mode_with_scripted_user(monkeypatch):
    from tau2.user import user_simulator

    replies = iter(["Please create a task called 'Important Meeting' for user_1.", "Thanks! ###STOP###"])
    monkeypatch.setattr(
        user_simulator,
        "generate",
        lambda **kw: AssistantMessage(role="assistant", content=next(replies), cost=0.0),
    )
    task = load_tau2_tasks("mock", ["create_task_1"], solo=False)[0]
    sim = run_simulation("mock", task, GoldActionAgent(), solo=False, seed=1, user_model="openai/fake", user_args={})
    assert sim.termination_reason.value == "user_stop"
    assert sim.reward_info.reward == 1.0
    roles = [m.role for m in sim.messages]
    assert roles == ["assistant", "user", "assistant", "tool", "assistant", "user"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_user_simulator_gives_one_line_error():
    url = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(Tau2EndpointError) as err:
        evaluate_tau2(DoNothingAgent(), domain="airline", user_base_url=url, user_model="qwen")
    message = str(err.value)
    assert url in message and "unreachable" in message and "\n" not in message


def test_conversation_mode_requires_an_endpoint_and_known_domain():
    with pytest.raises(ValueError, match="user_base_url and user_model"):
        evaluate_tau2(DoNothingAgent(), domain="retail")
    with pytest.raises(ValueError, match="unknown τ²-bench domain 'nope'"):
        evaluate_tau2(DoNothingAgent(), domain="nope", solo=True)
    with pytest.raises(ValueError, match="no solo-mode task"):
        evaluate_tau2(DoNothingAgent(), task_ids=["create_task_1_nl_eval"])


def test_user_simulator_gets_timeout_retries_and_concurrency(monkeypatch):
    """eval.tau2.user_simulator's timeout_s, retries and max_concurrency reach the user simulator."""
    import threading
    import time

    from tau2.user import user_simulator

    from slca.eval import tau2_bench

    calls, lock, state = [], threading.Lock(), {"inflight": 0, "most": 0}

    def scripted_user(**kw):
        with lock:
            calls.append(kw)
            state["inflight"] += 1
            state["most"] = max(state["most"], state["inflight"])
        time.sleep(0.05)  # a network round trip: conversations overlap here
        with lock:
            state["inflight"] -= 1
        spoke = any(m.role == "assistant" for m in kw["messages"])  # the user's own turns, roles flipped
        text = "Thanks! ###STOP###" if spoke else "Please create a task called 'Important Meeting' for user_1."
        return AssistantMessage(role="assistant", content=text, cost=0.0)

    monkeypatch.setattr(user_simulator, "generate", scripted_user)
    monkeypatch.setattr(tau2_bench, "check_endpoint", lambda url: None)
    ids = ["create_task_1", "update_task_1", "create_task_1_with_env_assertions"]

    def run(concurrency: int) -> dict:
        return evaluate_tau2(
            GoldActionAgent(),
            domain="mock",
            solo=False,
            task_ids=ids,
            num_trials=2,
            user_base_url="http://127.0.0.1:1/v1",
            user_model="sim",
            user_timeout_s=7.5,
            user_retries=3,
            user_max_concurrency=concurrency,
        )

    parallel = run(3)
    assert calls and all(kw["timeout"] == 7.5 and kw["num_retries"] == 3 for kw in calls)
    assert all(kw["api_base"] == "http://127.0.0.1:1/v1" for kw in calls)
    assert 1 < state["most"] <= 3
    state["most"] = 0
    sequential = run(1)
    assert state["most"] == 1
    assert parallel["tasks"] == sequential["tasks"] and parallel["tasks"]["create_task_1"]["rewards"] == [1.0, 1.0]
