"""Turn BFCL entries into chat messages + OpenAI-style tools, and run a policy over the categories.

`bfcl_to_openai_tools` follows BFCL's `convert_to_tool` for function-calling models: BFCL
types become JSON-schema types (dict->object, float->number with a "float" format, tuple->array,
any->string), dots in function names become underscores, and Java/JavaScript parameters are
first rewritten as strings holding source text (the language-specific pre-processing).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from slca.eval.bfcl.data import (
    CATEGORIES,
    category_language,
    check_category,
    load_category,
)
from slca.eval.bfcl.score import accuracy, aggregate, score_results

BFCL_TO_JSON_SCHEMA: dict[str, str] = {
    "integer": "integer",
    "number": "number",
    "float": "number",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "dict": "object",
    "object": "object",
    "tuple": "array",
    "any": "string",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "double": "number",
    "char": "string",
    "ArrayList": "array",
    "Array": "array",
    "HashMap": "object",
    "Hashtable": "object",
    "Queue": "array",
    "Stack": "array",
    "Any": "string",
    "String": "string",
    "Bigint": "integer",
}
PROMPT_SYSTEM = (
    "You are an expert in composing functions. You are given a question and a set of possible functions. "
    "Based on the question, you will need to make one or more function/tool calls to achieve the purpose.\n"
    "If none of the functions can be used, point it out. If the given question lacks the parameters required "
    "by the function, also point it out.\nYou should only return the function calls in your response.\n\n"
    "If you decide to invoke any of the function(s), you MUST put it in the format of "
    "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]\n"
    "You SHOULD NOT include any other text in the response.\n\n"
    "At each turn, you should try your best to complete the tasks requested by the user within the current turn. "
    "Continue to output functions to call until you have fulfilled the user's request to the best of your ability. "
    "Once you have no more functions to call, the system will consider the current turn complete and proceed to "
    "the next turn or task.\n\nHere is a list of functions in JSON format that you can invoke.\n{functions}\n\n"
)

GenerateFn = Callable[[list[dict[str, Any]], list[dict[str, Any]]], str]


def _language_hint(category: str) -> str:
    # BFCL compares the full category name to "java"/"javascript", so every category gets the Python hint.
    if category == "java":
        return " Note that the provided function is in Java 8 SDK syntax."
    if category == "javascript":
        return " Note that the provided function is in JavaScript syntax."
    return " Note that the provided function is in Python 3 syntax."


def _as_source_text_param(value: dict[str, Any], language: str) -> None:
    if value["type"] == "any":
        value["description"] += f" This parameter can be of any type of {language} object in string representation."
    else:
        value["description"] += f" This is {language} {value['type']} type parameter in string representation."
    if value["type"] in (("ArrayList", "Array") if language == "Java" else ("array",)):
        value["description"] += (
            f" The list elements are of type {value['items']['type']}; they are not in string representation."
        )
        del value["items"]
    if language == "JavaScript" and value["type"] == "dict" and "properties" in value:
        value["description"] += (
            " The dictionary entries have the following schema; they are not in string "
            f"representation. {json.dumps(value['properties'])}"
        )
        del value["properties"]
    value["type"] = "string"


def language_specific_functions(functions: list[dict[str, Any]], category: str) -> list[dict[str, Any]]:
    """Copy of `functions` with BFCL's language hint; Java/JS parameters become source-text strings."""
    functions = copy.deepcopy(functions)
    language = category_language(category)
    for item in functions:
        item["description"] = item["description"] + _language_hint(category)
        if language != "Python":
            for value in item["parameters"]["properties"].values():
                _as_source_text_param(value, language)
    return functions


def _cast_properties(properties: dict[str, Any]) -> dict[str, Any]:
    for value in properties.values():
        declared = value.get("type")
        if declared is None:
            value["type"] = "string"
        else:
            if declared == "float":
                value["format"] = "float"
                value["description"] += " This is a float type value."
            value["type"] = BFCL_TO_JSON_SCHEMA.get(declared, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast_properties(value["properties"])
            elif "items" in value:
                items = value["items"]
                items["type"] = BFCL_TO_JSON_SCHEMA[items["type"]]
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = BFCL_TO_JSON_SCHEMA[items["items"]["type"]]
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_properties(items["properties"])
    return properties


def bfcl_to_openai_tools(functions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BFCL function docs -> `[{"type": "function", "function": {name, description, parameters}}]`."""
    tools = []
    for item in copy.deepcopy(functions):
        item["name"] = re.sub(r"\.", "_", item["name"])
        item["parameters"]["type"] = "object"
        item["parameters"]["properties"] = _cast_properties(item["parameters"]["properties"])
        tools.append({"type": "function", "function": item})
    return tools


def bfcl_questions_to_messages(entry: dict[str, Any], mode: str = "fc") -> list[dict[str, str]]:
    """Chat messages of an entry's (single) turn; mode "prompt" adds BFCL's system prompt with the docs."""
    messages = copy.deepcopy(entry["question"][0])
    if mode == "fc":
        return messages
    if mode != "prompt":
        raise ValueError(f"unknown mode {mode!r}; expected fc or prompt")
    category = entry["id"].rsplit("_", 1)[0]
    docs = language_specific_functions(entry["function"], category)
    system = PROMPT_SYSTEM.format(functions=json.dumps(docs, indent=4))
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] = system + "\n\n" + messages[0]["content"]
    else:
        messages.insert(0, {"role": "system", "content": system})
    return messages


def entry_tools(entry: dict[str, Any], category: str) -> list[dict[str, Any]]:
    """The tools offered for one entry in function-calling mode."""
    return bfcl_to_openai_tools(language_specific_functions(entry["function"], category))


def run_generation(
    generate_fn: GenerateFn, categories: Iterable[str] = CATEGORIES, limit: int | None = None, mode: str = "fc"
) -> dict[str, Any]:
    """Generate with `generate_fn(messages, tools) -> raw text` on each category, score, aggregate.
    A `generate_fn` with a `many(chats)` method (`slca.rollout.hf.make_generate_fn`) gets every category's
    entries in one call, to batch them; entries are independent single-turn chats.

    Returns {"results": {cat: [{id, result}]}, "verdicts": {cat: [line]}, "accuracy": {cat: float},
    "aggregate": leaderboard summary}. `limit` keeps the first N entries of each category.
    """
    entries: dict[str, list[dict[str, Any]]] = {}
    chats: list[tuple[list[dict[str, str]], list[dict[str, Any]]]] = []
    for category in categories:
        entries[category] = load_category(check_category(category))[: limit if limit is not None else None]
        chats += [
            (bfcl_questions_to_messages(entry, mode), entry_tools(entry, category) if mode == "fc" else [])
            for entry in entries[category]
        ]
    many = getattr(generate_fn, "many", None)
    texts = iter(many(chats) if callable(many) else [generate_fn(messages, tools) for messages, tools in chats])
    results: dict[str, list[dict[str, Any]]] = {}
    verdicts: dict[str, list[dict[str, Any]]] = {}
    accuracies: dict[str, float] = {}
    for category, listed in entries.items():
        outputs = [{"id": entry["id"], "result": next(texts)} for entry in listed]
        scored = score_results(category, outputs, output_format="json" if mode == "fc" else "prompt")
        results[category] = outputs
        verdicts[category] = [v.to_line() for v in scored]
        accuracies[category] = accuracy(scored)
    return {"results": results, "verdicts": verdicts, "accuracy": accuracies, "aggregate": aggregate(accuracies)}
