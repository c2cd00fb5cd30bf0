"""Copy-forcing augmentation: copied values are rewritten consistently, everything else is kept."""

from __future__ import annotations

import json
import random

from policy_fixtures import no_call_task, parallel_task, single_task

from slca.train.augment import augment_tasks, copied_values, copy_augmented, same_shape


def test_same_shape_keeps_case_digits_and_punctuation():
    out = same_shape("ACC-10200 São x9", random.Random(0))
    assert len(out) == len("ACC-10200 São x9")
    assert out[:3].isupper() and out[3] == "-" and out[4:9].isdigit() and out[9] == " "
    assert out[11] == "ã" and out[13] == " " and out[14].islower() and out[15].isdigit()
    assert out != "ACC-10200 São x9"


def test_copied_values_are_the_arguments_shown_before_the_call():
    task = parallel_task(1)
    first, second = (call["arguments"]["city"] for call in task["gold_steps"][0])
    assert set(copied_values(task)) == {first, second}
    assert copied_values(no_call_task(0)) == []


def test_rewrite_is_consistent_and_leaves_system_and_schemas_alone():
    task = single_task(3)
    city = task["gold_steps"][0][0]["arguments"]["city"]
    out = copy_augmented(task, random.Random(5))
    new_city = out["gold_steps"][0][0]["arguments"]["city"]
    assert new_city != city and len(new_city) == len(city)
    assert new_city in out["messages"][-1]["content"] and city not in out["messages"][-1]["content"]
    assert new_city in out["gold_summary"] and out["gold_responses"][0][0]["city"] == new_city
    assert out["messages"][0] == task["messages"][0] and out["tools"] == task["tools"]
    assert out["gold_steps"][0][0]["name"] == "get_weather"
    assert task["gold_steps"][0][0]["arguments"]["city"] == city  # the input is not mutated


def test_values_in_the_system_prompt_or_schemas_are_not_rewritten():
    task = single_task(0)
    city = task["gold_steps"][0][0]["arguments"]["city"]
    task["messages"] = [{"role": "system", "content": f"You work in {city}."}, task["messages"][1]]
    assert copied_values(task) == []
    enum_task = single_task(1)
    enum_task["tools"] = json.loads(json.dumps(enum_task["tools"]))
    enum_task["tools"][0]["function"]["parameters"]["properties"]["city"]["enum"] = [
        enum_task["gold_steps"][0][0]["arguments"]["city"]
    ]
    assert copied_values(enum_task) == []


def test_augment_tasks_is_seeded_and_rewrites_about_the_fraction():
    tasks = [single_task(i) for i in range(200)]
    first, again = augment_tasks(tasks, 0.5, seed=3), augment_tasks(tasks, 0.5, seed=3)
    assert first == again
    rewritten = sum(a != t for a, t in zip(first, tasks, strict=True))
    assert 70 <= rewritten <= 130
    assert augment_tasks(tasks, 0.0, seed=3) == tasks


def test_renamed_tools_are_offered_and_called_under_one_new_name_each():
    from slca.rollout.chat import gold_conversation
    from slca.train.augment import rename_augmented

    task = single_task(2)
    old = [t["function"]["name"] for t in task["tools"]]
    out = rename_augmented(task, random.Random(3))
    new = [t["function"]["name"] for t in out["tools"]]
    assert len(set(new)) == len(new) and not set(new) & set(old)
    mapping = dict(zip(old, new, strict=True))
    assert [[c["name"] for c in s] for s in out["gold_steps"]] == [
        [mapping[c["name"]] for c in s] for s in task["gold_steps"]
    ]
    assert [t["function"]["parameters"] for t in out["tools"]] == [t["function"]["parameters"] for t in task["tools"]]
    text = json.dumps(gold_conversation(out))
    assert not any(f'"{name}"' in text for name in old)  # the dialogue calls only the offered names
    assert task["tools"][0]["function"]["name"] == old[0]  # the input is not mutated


def test_rename_tasks_is_seeded_and_renames_about_the_fraction():
    from slca.train.augment import rename_tasks

    tasks = [single_task(i) for i in range(200)]
    first, again = rename_tasks(tasks, 0.5, seed=1), rename_tasks(tasks, 0.5, seed=1)
    assert first == again and rename_tasks(tasks, 0.0, seed=1) == tasks
    changed = sum(a["tools"] != b["tools"] for a, b in zip(first, tasks, strict=True))
    assert 70 <= changed <= 130
