"""The `llm` backend against a real local HTTP server speaking /v1/chat/completions.

The server is a scripted stand-in for a vLLM endpoint: it reads the incoming request out of the
prompt and answers with the real executor's output as `<tool_response>` (or, in other modes, messy
but repairable text, garbage, a non-conforming object, a slow reply, or HTTP 500). A second,
trickling server (`trickle_server`) checks the total deadline per request; local callables check
the fallback budget and the cache (keys, re-validation of hits, concurrent writers).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from trickle_server import trickling_server

from slca.config import EndpointParams, SimulatorParams
from slca.simulator import SimulatorSession
from slca.simulator.cache import ResponseCache
from slca.simulator.endpoint import ChatClient, EndpointError
from slca.simulator.llm import LLMBackend, parse_tool_response
from slca.simulator.specs import toolset
from slca.simulator.state import EpisodeState
from slca.simulator.types import Knobs
from slca.tools import World, execute, tool_map

TOOLS = tool_map()
WEATHER = [TOOLS["get_current_weather"], TOOLS["get_forecast"]]
LIMA = '{"name": "get_current_weather", "arguments": {"city": "Lima"}}'


class StandIn(BaseHTTPRequestHandler):
    """One chat completion per POST; behaviour set by `server.mode`."""

    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.requests.append(body)
            server.inflight += 1
            server.max_inflight = max(server.max_inflight, server.inflight)
        try:
            time.sleep(server.delay_s)
            if self.path != "/v1/chat/completions" or server.mode == "error500":
                return self._send(500, {"error": "boom"})
            self._send(200, completion(body, reply_text(server.mode, body)))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)
        finally:
            with server.lock:
                server.inflight -= 1

    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def reply_text(mode: str, body: dict) -> str:
    request = json.loads(body["messages"][-1]["content"].split("Incoming request:\n", 1)[1])
    real = execute(World(7), request["name"], request["arguments"])
    payload = json.dumps(real.content if real.ok else {"error": real.error})
    if mode == "good":
        return f"<tool_response>{payload}</tool_response>"
    if mode == "messy":  # fenced, no closing tag, trailing comma
        return "```json\n<tool_response>" + payload[:-1] + ",}\n```"
    if mode == "nonconforming":
        return '<tool_response>{"temp": "hot"}</tool_response>'
    return "Sure! The weather in Lima is lovely today."


def completion(body: dict, text: str) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@pytest.fixture()
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    httpd.daemon_threads = True
    httpd.mode, httpd.delay_s, httpd.requests = "good", 0.0, []
    httpd.lock, httpd.inflight, httpd.max_inflight = threading.Lock(), 0, 0
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def sim_params(server, tmp_path, **endpoint) -> SimulatorParams:
    options = {"timeout_s": 2.0, "retries": 0, "max_concurrency": 2, "model": "sim-model"} | endpoint
    llm = EndpointParams(base_url=f"http://127.0.0.1:{server.server_port}/v1", **options)
    return SimulatorParams(backend="llm", llm=llm, cache_path=str(tmp_path / "cache.sqlite"), calibrated_knobs=None)


def test_llm_answer_prompt_and_persistent_cache(server, tmp_path):
    params = sim_params(server, tmp_path)
    result = SimulatorSession(WEATHER, "llm", params).call(LIMA)
    assert result.ok and result.source == "llm"
    assert result.content == execute(World(7), "get_current_weather", {"city": "Lima"}).content
    sent = server.requests[0]
    assert sent["model"] == "sim-model"
    system = sent["messages"][0]["content"]
    assert system.startswith("You are an API SERVER, NOT an AI assistant")
    assert '"response"' in system and "<tool_response>" in sent["messages"][2]["content"]
    repeat = SimulatorSession(WEATHER, "llm", params).call(LIMA)  # next episode shares the backend
    again = SimulatorSession(WEATHER, LLMBackend(params), params).call(LIMA)  # fresh process-like backend, same file
    assert (repeat.source, again.source, again.content) == ("cache", "cache", result.content)
    assert len(server.requests) == 1


def test_validation_errors_never_reach_the_endpoint(server, tmp_path):
    session = SimulatorSession(WEATHER, "llm", sim_params(server, tmp_path))
    assert session.call('{"name": "get_forecast", "arguments": {"city": "Lima"}}').error_class == "missing_required"
    assert session.call('{"name": "nope", "arguments": {}}').error_class == "unknown_tool"
    assert server.requests == []


@pytest.mark.parametrize(
    ("mode", "source", "stat"),
    [
        ("messy", "llm", None),
        ("garbage", "fallback", "unparsable"),
        ("nonconforming", "fallback", "nonconforming"),
    ],
)
def test_replies_are_repaired_or_replaced(server, tmp_path, mode, source, stat):
    server.mode = mode
    backend = LLMBackend(sim_params(server, tmp_path))
    result = SimulatorSession(WEATHER, backend, knobs={}).call(LIMA)
    spec = toolset(WEATHER)["get_current_weather"]
    assert result.ok and result.source == source and spec.response_errors(result.content) == []
    assert result.content["city"] == "Lima"
    if stat:
        assert backend.stats[stat] == 1 and len(backend.cache) == 0  # fallbacks are not cached


def test_slow_endpoint_times_out_and_falls_back(server, tmp_path):
    server.mode, server.delay_s = "good", 1.5
    backend = LLMBackend(sim_params(server, tmp_path, timeout_s=0.3))
    start = time.perf_counter()
    result = SimulatorSession(WEATHER, backend, knobs={}).call(LIMA)
    assert time.perf_counter() - start < 1.2
    assert result.ok and result.source == "fallback" and backend.stats["endpoint_error"] == 1


def test_server_errors_are_retried_then_fall_back(server, tmp_path):
    server.mode = "error500"
    backend = LLMBackend(sim_params(server, tmp_path, retries=2))
    backend.generate.backoff_s = 0.01
    result = SimulatorSession(WEATHER, backend, knobs={}).call(LIMA)
    assert result.source == "fallback" and len(server.requests) == 3


def test_unreachable_endpoint_falls_back(tmp_path):
    llm = EndpointParams(base_url="http://127.0.0.1:9/v1", timeout_s=0.5, retries=0)
    params = SimulatorParams(llm=llm, cache_path=str(tmp_path / "c.sqlite"), calibrated_knobs=None)
    result = SimulatorSession(WEATHER, "llm", params).call(LIMA)
    assert result.ok and result.source == "fallback"


def test_concurrency_is_bounded(server, tmp_path):
    server.delay_s = 0.15
    backend = LLMBackend(sim_params(server, tmp_path, max_concurrency=2))
    spec = toolset(WEATHER)["get_forecast"]
    jobs = [
        (spec, {"city": city, "days": 2}, EpisodeState(i), Knobs())
        for i, city in enumerate(["Lima", "Quito", "Paris", "Tokyo", "Delhi", "Oslo"])
    ]
    results = backend.respond_many(jobs)
    assert [r.content["city"] for r in results] == ["Lima", "Quito", "Paris", "Tokyo", "Delhi", "Oslo"]
    assert all(r.source == "llm" for r in results)
    assert server.max_inflight == 2


def test_local_callable_backend_and_write_context():
    prompts = []

    def generate(messages):
        prompts.append(messages[-1]["content"])
        return (
            '<tool_response>{"booking_id": "BKG-9001", "status": "cancelled", "refund_amount": 12.5, "currency": "USD"}'
        )

    backend = LLMBackend(generate=generate, cache=ResponseCache(":memory:"))
    session = SimulatorSession([TOOLS["cancel_booking"], TOOLS["get_booking"]], backend, knobs={})
    session.state.records[("booking_id", "BKG-9001")] = {"booking_id": "BKG-9001", "status": "confirmed"}
    result = session.call('{"name": "cancel_booking", "arguments": {"booking_id": "BKG-9001"}}')
    assert result.source == "llm" and result.content["refund_amount"] == 12.5
    assert "Known records" in prompts[0] and "confirmed" in prompts[0]
    assert session.state.records[("booking_id", "BKG-9001")]["status"] == "cancelled"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('<tool_response>{"a": 1}</tool_response>', {"a": 1}),
        ('```json\n{"a": [1, 2,],}\n```', {"a": [1, 2]}),
        ("<tool_response>{'a': True, 'b': None}</tool_response>", {"a": True, "b": None}),
        ('noise <tool_response> {"a": {"b": "x"}} trailing', {"a": {"b": "x"}}),
        ("no json here", None),
        ("[1, 2]", None),
        (None, None),
        ("{" * 5000 + "}" * 5000, None),
    ],
)
def test_parse_tool_response(text, expected):
    assert parse_tool_response(text) == expected


# ---------------------------------------------------------------- deadline, fallback budget, cache keys


def test_trickling_server_is_cut_off_at_the_total_deadline():
    """One byte every 0.2 s never trips a per-read timeout of 1 s; the request deadline does."""
    with trickling_server("<tool_response>{}</tool_response>") as url:
        client = ChatClient(EndpointParams(base_url=url, timeout_s=1.0, retries=0))
        start = time.monotonic()
        with pytest.raises(EndpointError, match="timed out after 1s"):
            client([{"role": "user", "content": "hi"}])
        assert time.monotonic() - start < 1.8


def _weather_reply(messages: list[dict]) -> str:
    return reply_text("good", {"messages": messages})


def _fallback_backend(replies: list[bool], window: int, max_rate: float) -> LLMBackend:
    """A local-callable backend whose k-th request gets a good reply when replies[k] is True, else garbage."""
    from slca.config import FailureBudget

    answers = iter(replies)

    def generate(messages: list[dict]) -> str:
        return _weather_reply(messages) if next(answers) else "no json here"

    params = SimulatorParams(
        backend="llm", calibrated_knobs=None, llm_fallback_budget=FailureBudget(window=window, max_rate=max_rate)
    )
    return LLMBackend(params, generate=generate, cache=ResponseCache(":memory:"))


def test_fallback_rate_is_counted_per_step_and_over_the_window():
    from slca.simulator.endpoint import FailureBudgetExceeded

    backend = _fallback_backend([True, True, True, False, False], window=4, max_rate=0.25)
    session = SimulatorSession(WEATHER, backend, knobs={})
    for city in ["Lima", "Quito", "Paris", "Oslo"]:
        session.call({"name": "get_current_weather", "arguments": {"city": city}})
    session.call({"name": "get_current_weather", "arguments": {"city": "Lima"}})  # a cache hit is no request
    assert backend.fallbacks.step_rate() == 0.25 and backend.fallbacks.step_rate() == 0.0
    backend.fallbacks.check()  # 1 of the last 4 requests: at the budget, not over it
    assert session.call({"name": "get_current_weather", "arguments": {"city": "Delhi"}}).source == "fallback"
    with pytest.raises(FailureBudgetExceeded) as error:
        backend.fallbacks.check()
    message = str(error.value)
    assert "2 of the last 4" in message and "simulator.llm_fallback_budget.max_rate" in message
    assert "\n" not in message


def test_fallback_budget_waits_for_a_full_window():
    backend = _fallback_backend([False, False], window=3, max_rate=0.0)
    session = SimulatorSession(WEATHER, backend, knobs={})
    for city in ["Lima", "Quito"]:
        assert session.call({"name": "get_current_weather", "arguments": {"city": city}}).source == "fallback"
    backend.fallbacks.check()  # 2 calls of a 3-call window: too few to judge
    assert backend.fallbacks.step_rate() == 1.0


def _requests_for(params: SimulatorParams, server, tools=WEATHER) -> int:
    before = len(server.requests)
    result = SimulatorSession(tools, LLMBackend(params), knobs={}).call(LIMA)
    assert result.ok
    return len(server.requests) - before


def test_cache_misses_when_endpoint_model_prompt_or_schema_change(server, tmp_path, monkeypatch):
    from slca.simulator import llm

    params = sim_params(server, tmp_path)
    assert _requests_for(params, server) == 1
    assert _requests_for(params, server) == 0  # same everything: a hit
    same_server = params.llm.model_copy(update={"base_url": f"http://localhost:{server.server_port}/v1"})
    assert _requests_for(params.model_copy(update={"llm": same_server}), server) == 1
    other_model = params.llm.model_copy(update={"model": "sim-model-2"})
    assert _requests_for(params.model_copy(update={"llm": other_model}), server) == 1
    changed = json.loads(json.dumps(TOOLS["get_current_weather"]))
    changed["response"]["properties"]["city"]["description"] = "City the reading is for."
    assert _requests_for(params, server, [changed, TOOLS["get_forecast"]]) == 1
    monkeypatch.setattr(llm, "PROMPT_VERSION", "api-server-next")
    assert _requests_for(params, server) == 1


def _other_value(value):
    return (not value) if isinstance(value, bool) else value + 1


def test_cache_key_covers_every_knob_that_shapes_the_request_and_the_generation_settings(server, tmp_path):
    """A cached answer is served only for the same request: a knob that changes the few-shot example
    (array sizes, new-record ids, echoed arguments) or a different max_tokens asks the model again, while
    knobs that only validate arguments (checked before the cache) still hit."""
    from slca.simulator.llm import build_messages

    params = sim_params(server, tmp_path)
    specs = list(toolset(list(TOOLS.values())).values())
    shaping = {
        name
        for name in Knobs.names()
        for spec in specs
        if build_messages(spec, {}, {}, Knobs(**{name: _other_value(getattr(Knobs(), name))}))
        != build_messages(spec, {}, {}, Knobs())
    }
    assert {"echo_arguments", "array_min_items", "array_max_items", "new_id_start"} <= shaping
    weather = toolset(WEATHER)["get_current_weather"]

    def asks(knobs: dict, llm_max_tokens: int = 512) -> int:
        before = len(server.requests)
        session = SimulatorSession(
            WEATHER, LLMBackend(params.model_copy(update={"llm_max_tokens": llm_max_tokens})), knobs=knobs
        )
        assert session.call(LIMA).ok
        return len(server.requests) - before

    assert asks({}) == 1 and asks({}) == 0
    for name in Knobs.names():
        changed = {name: _other_value(getattr(Knobs(), name))}
        prompt_differs = build_messages(weather, {"city": "Lima"}, {}, Knobs(**changed)) != build_messages(
            weather, {"city": "Lima"}, {}, Knobs()
        )
        assert asks(changed) == (1 if prompt_differs else 0), name
    assert asks({}, llm_max_tokens=256) == 1
    assert asks({}, llm_max_tokens=256) == 0


class PoisonedCache(ResponseCache):
    """A cache whose every entry is a response the schema no longer accepts."""

    def get(self, key: str) -> dict | None:
        return {"temp": "hot"}


def test_invalid_cached_entry_is_not_served():
    def generate(messages: list[dict]) -> str:
        return _weather_reply(messages)

    backend = LLMBackend(generate=generate, cache=PoisonedCache(":memory:"))
    result = SimulatorSession(WEATHER, backend, knobs={}).call(LIMA)
    assert result.source == "llm" and result.content["city"] == "Lima"
    assert backend.stats["invalid_cache"] == 1


def test_unreadable_cache_row_is_a_miss(tmp_path):
    path = tmp_path / "cache.sqlite"
    ResponseCache(path).close()
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO responses VALUES (?, ?, ?, ?)",
            [("broken", "t", "{not json", 0.0), ("list", "t", "[1, 2]", 0.0)],
        )
    cache = ResponseCache(path)
    assert cache.get("broken") is None and cache.get("list") is None and cache.misses == 2


class SlowDict(dict):
    """A memo whose eviction pauses, so that unlocked concurrent evictions collide."""

    def pop(self, *args):
        time.sleep(0.001)
        return super().pop(*args)


def test_concurrent_writers_share_the_cache(monkeypatch):
    import slca.simulator.cache as cache_module

    monkeypatch.setattr(cache_module, "MEMO_SIZE", 4)
    cache = ResponseCache(":memory:")
    cache._memo = SlowDict()
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            for i in range(40):
                cache.put(f"{worker}-{i}", "tool", {"worker": worker, "i": i})
                assert cache.get(f"{worker}-{i}") == {"worker": worker, "i": i}
        except BaseException as error:  # noqa: BLE001 - collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(cache) == 320 and len(cache._memo) <= 4
