"""Hand-built task rows and small params shared by the policy, SFT, rollout and in-domain tests."""

from __future__ import annotations

from typing import Any

from slca.config import Params

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name."}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name."}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
CITIES = ["Lima", "Oslo", "Quito", "Porto", "Kyoto", "Accra", "Perth", "Dakar", "Hanoi", "Cusco"]
SYSTEM = {"role": "system", "content": "You are a helpful assistant that can call tools."}


def weather(city: str) -> dict[str, Any]:
    return {"city": city, "temp_c": 10 + len(city), "sky": "cloudy" if len(city) % 2 else "clear"}


def single_task(index: int, split: str = "train") -> dict[str, Any]:
    city = CITIES[index % len(CITIES)]
    response = weather(city)
    return {
        "id": f"{split}-{index}",
        "domain": "weather",
        "kind": "single",
        "split": split,
        "messages": [SYSTEM, {"role": "user", "content": f"What is the weather in {city}?"}],
        "tools": [WEATHER_TOOL, TIME_TOOL],
        "gold_steps": [[{"name": "get_weather", "arguments": {"city": city}}]],
        "gold_responses": [[response]],
        "reference": [f"{response['temp_c']}", response["sky"]],
        "gold_summary": f"It is {response['temp_c']} C and {response['sky']} in {city}.",
        "template_id": "w1",
        "entities": [city],
    }


def parallel_task(index: int, split: str = "train") -> dict[str, Any]:
    first, second = CITIES[index % len(CITIES)], CITIES[(index + 3) % len(CITIES)]
    responses = [weather(first), weather(second)]
    return {
        "id": f"{split}-p{index}",
        "domain": "weather",
        "kind": "parallel",
        "split": split,
        "messages": [SYSTEM, {"role": "user", "content": f"Weather in {first} and in {second}?"}],
        "tools": [WEATHER_TOOL],
        "gold_steps": [
            [
                {"name": "get_weather", "arguments": {"city": first}},
                {"name": "get_weather", "arguments": {"city": second}},
            ]
        ],
        "gold_responses": [responses],
        "reference": [str(responses[0]["temp_c"]), str(responses[1]["temp_c"])],
        "gold_summary": f"{first}: {responses[0]['temp_c']} C; {second}: {responses[1]['temp_c']} C.",
        "template_id": "w2",
        "entities": [first, second],
    }


def no_call_task(index: int, split: str = "train") -> dict[str, Any]:
    return {
        "id": f"{split}-n{index}",
        "domain": "weather",
        "kind": "no_call",
        "split": split,
        "messages": [SYSTEM, {"role": "user", "content": "Please write me a poem about spring."}],
        "tools": [WEATHER_TOOL],
        "gold_steps": [],
        "gold_responses": [],
        "reference": [],
        "gold_summary": "",
        "template_id": "n1",
        "entities": [],
    }


def tiny_tasks(n: int = 20, split: str = "train") -> list[dict[str, Any]]:
    builders = [single_task, single_task, parallel_task, no_call_task]
    return [builders[i % len(builders)](i, split) for i in range(n)]


def small_params(tmp_path: Any = None, **sft: Any) -> Params:
    sft_section = {"max_steps": 8, "batch_size": 4, "max_length": 512, "n_examples": 20, "learning_rate": 3e-3}
    sft_section.update(sft)
    raw: dict[str, Any] = {
        "policy": {
            "tiny": {
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "intermediate_size": 128,
                "vocab_size": 600,
            }
        },
        "sft": sft_section,
    }
    if tmp_path is not None:
        raw["data"] = {"out_dir": str(tmp_path / "data")}
        raw["sft"]["out_dir"] = str(tmp_path / "sft")
        raw["project"] = {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    return Params.model_validate(raw)
