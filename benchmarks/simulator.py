"""Simulator throughput: `schema` backend calls/s on one core, and the cached `llm` path's overhead.

Each episode is a fresh `SimulatorSession` answering the catalog's example calls (every tool once,
in an order where later calls read earlier writes) as raw `<tool_call>` text. Throughput is
reported per CPU-second of this process (one core; robust to other load) and per wall second.
The `llm` rows use a local model callable behind the SQLite cache: a first pass fills the cache,
the timed pass is answered entirely from it (checked: no further model calls).

    python benchmarks/simulator.py [--calls 6000] [--json reports/bench_simulator.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from slca.simulator import SimulatorSession
from slca.simulator.backends import synthesize_response
from slca.simulator.cache import ResponseCache
from slca.simulator.llm import LLMBackend
from slca.simulator.specs import toolset
from slca.simulator.state import EpisodeState
from slca.simulator.types import Knobs
from slca.tools import World
from slca.tools.examples import example_calls

TARGET_CALLS_PER_S = 5000


def episode_texts() -> list[str]:
    return [json.dumps({"name": name, "arguments": arguments}) for name, arguments in example_calls(World(7))]


def timed(backend: object, texts: list[str], n_calls: int, world: World | None = None) -> dict[str, float]:
    """Run whole episodes until n_calls; CPU and wall seconds per call."""
    specs = toolset(None)
    done = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    episode = 0
    while done < n_calls:
        session = SimulatorSession(specs, backend, knobs={}, world=world, seed=episode)
        for text in texts:
            session.call(text)
        done += len(texts)
        episode += 1
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    return {
        "calls": float(done),
        "us_per_call_cpu": cpu / done * 1e6,
        "us_per_call_wall": wall / done * 1e6,
        "calls_per_s_cpu": done / cpu,
        "calls_per_s_wall": done / wall,
    }


def stub_model(counter: list[int]):
    """A local 'model' that answers like an API server (schema-valid JSON in the tag)."""
    specs = toolset(None)

    def generate(messages: list[dict]) -> str:
        counter[0] += 1
        request = json.loads(messages[-1]["content"].split("Incoming request:\n", 1)[1])
        content = synthesize_response(specs[request["name"]], request["arguments"], EpisodeState(), Knobs())
        return f"<tool_response>{json.dumps(content)}</tool_response>"

    return generate


def run(n_calls: int) -> dict[str, dict[str, float]]:
    texts = episode_texts()
    results = {"schema": timed("schema", texts, n_calls)}
    model_calls = [0]
    with tempfile.TemporaryDirectory() as tmp:
        backend = LLMBackend(generate=stub_model(model_calls), cache=ResponseCache(Path(tmp) / "cache.sqlite"))
        timed(backend, texts, n_calls)  # fills the cache (episodes repeat, so later ones already hit)
        filled = model_calls[0]
        results["llm_cached"] = timed(backend, texts, n_calls)
        results["llm_cached"]["model_calls_during_timing"] = float(model_calls[0] - filled)
    results["real"] = timed("real", texts, max(len(texts), n_calls // 4), world=World(7))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=6000, help="calls per timed backend")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    results = run(args.calls)
    schema_us = results["schema"]["us_per_call_cpu"]
    print(f"{'backend':<12}{'calls/s (1 core)':>18}{'calls/s (wall)':>16}{'us/call (cpu)':>15}")
    for name, row in results.items():
        print(
            f"{name:<12}{row['calls_per_s_cpu']:>18,.0f}{row['calls_per_s_wall']:>16,.0f}{row['us_per_call_cpu']:>15.1f}"
        )
    overhead = results["llm_cached"]["us_per_call_cpu"] - schema_us
    print(
        f"cached llm overhead vs schema: {overhead:+.1f} us/call; model calls while timing: "
        f"{results['llm_cached']['model_calls_during_timing']:.0f}"
    )
    verdict = "meets" if results["schema"]["calls_per_s_cpu"] >= TARGET_CALLS_PER_S else "misses"
    print(f"schema backend {verdict} the {TARGET_CALLS_PER_S:,} calls/s target")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**results, "llm_cached_overhead_us": overhead}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
