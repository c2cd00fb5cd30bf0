"""Render a BFCL possible answer as model output: the first acceptable value of every parameter.

Used to check the scorer end to end (a gold answer must pass wherever BFCL's own checker lets it)
and for the scoring benchmark. Prompt style writes calls in the category's language
(Python calls, Java or JavaScript literal syntax); JSON style writes `<tool_call>` blocks.
"""

from __future__ import annotations

import json
import re
from typing import Any

from slca.eval.bfcl.checker import expected_function_name, find_description
from slca.eval.bfcl.data import category_language

_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")
_JAVA_ARRAY_TYPES = {
    "String": "String",
    "integer": "int",
    "long": "long",
    "char": "char",
    "double": "double",
    "float": "float",
    "boolean": "boolean",
    "any": "Object",
}
NO_CALL_OUTPUT = "None of the available functions can answer this question."


def first_value(allowed: Any) -> Any:
    """The first acceptable value other than "" (the optional marker); "" when there is none."""
    if not isinstance(allowed, list):
        return allowed  # a few answers hold a bare value instead of a list of values
    return next((value for value in allowed if value != ""), "")


def natural_dict(candidate: dict[str, list[Any]]) -> dict[str, Any]:
    """A dict answer `{key: [allowed...]}` as the dict a model would write."""
    return {key: first_value(allowed) for key, allowed in candidate.items() if first_value(allowed) != ""}


def natural_value(allowed: list[Any], details: dict[str, Any]) -> Any:
    """The value a model writes for a parameter: dict answers and lists of dict answers unfolded."""
    value = first_value(allowed)
    if isinstance(value, dict) and details["type"] in ("dict", "HashMap"):
        return natural_dict(value)
    if isinstance(value, list) and details.get("items", {}).get("type") == "dict":
        return [natural_dict(item) if isinstance(item, dict) else item for item in value]
    return value


def answer_calls(entry: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(function name, argument values, parameter details) for each call of the possible answer."""
    calls = []
    for answer in entry["ground_truth"]:
        name, params = next(iter(answer.items()))
        properties = find_description(entry["function"], name)["parameters"]["properties"]  # type: ignore[index]
        # Parameters the function does not declare are left out: a model cannot know them.
        arguments = {
            p: natural_value(allowed, properties[p])
            for p, allowed in params.items()
            if p in properties and first_value(allowed) != ""
        }
        calls.append((name, arguments, properties))
    return calls


# ---------------------------------------------------------------- Java / JavaScript literals


def java_literal(value: Any, declared: str, item_type: str | None = None) -> str:
    """Java source text for `value` of BFCL type `declared`."""
    if isinstance(value, str) and declared not in ("String", "any", "char"):
        return value if _IDENTIFIER.match(value) else json.dumps(value, ensure_ascii=False)  # a variable
    if isinstance(value, str) and '"' in value:
        return value  # Java source such as `new X("a", 1)`, written as code
    if declared == "boolean" or isinstance(value, bool):
        return "true" if value else "false"
    if declared == "long":
        return f"{value}L"
    if declared == "float":
        return f"{value}f"
    if declared == "double":
        return repr(float(value))
    if declared == "char":
        return f"'{value}'"
    if declared == "Array":
        items = ", ".join(java_literal(v, item_type or "any") for v in value)
        return f"new {_JAVA_ARRAY_TYPES.get(item_type or 'any', 'Object')}[]{{{items}}}"
    if declared == "ArrayList":
        items = ", ".join(java_literal(v, item_type or "any") for v in value)
        return f"new ArrayList<>(Arrays.asList({items}))" if value else "new ArrayList<>()"
    if declared == "HashMap":
        puts = " ".join(f'put("{k}", {java_literal(v, "any")});' for k, v in value.items())
        return f"new HashMap<String, Object>() {{{{ {puts} }}}}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def js_literal(value: Any, declared: str) -> str:
    """JavaScript source text for `value` of BFCL type `declared`."""
    if isinstance(value, str) and declared not in ("String", "any"):
        return value if _IDENTIFIER.match(value) else json.dumps(value, ensure_ascii=False)  # a variable
    if declared == "Bigint":
        return f"{value}n"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(js_literal(v, "any") for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {js_literal(v, 'any')}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def _literal(value: Any, details: dict[str, Any], language: str) -> str:
    if language == "Java":
        return java_literal(value, details["type"], details.get("items", {}).get("type"))
    if language == "JavaScript":
        return js_literal(value, details["type"])
    return repr(value)


# ---------------------------------------------------------------- whole outputs


def render_prompt_answer(entry: dict[str, Any], category: str) -> str:
    """`[f(a=..), g(b=..)]` in the category's language."""
    if entry.get("ground_truth") is None:
        return NO_CALL_OUTPUT
    language = category_language(category)
    calls = []
    for name, arguments, properties in answer_calls(entry):
        args = ", ".join(f"{p}={_literal(v, properties[p], language)}" for p, v in arguments.items())
        calls.append(f"{name}({args})")
    return "[" + ", ".join(calls) + "]"


def _json_argument(value: Any, details: dict[str, Any], language: str) -> Any:
    if language == "Python":
        return value
    if isinstance(value, str):
        return value  # a string or a variable name: the JSON string is already its text
    return _literal(value, details, language)  # other Java/JS values travel as their source text


def render_json_answer(entry: dict[str, Any], category: str) -> str:
    """`<tool_call>` JSON blocks with dots in names replaced, as offered by `bfcl_to_openai_tools`."""
    if entry.get("ground_truth") is None:
        return NO_CALL_OUTPUT
    language = category_language(category)
    blocks = []
    for name, arguments, properties in answer_calls(entry):
        args = {p: _json_argument(v, properties[p], language) for p, v in arguments.items()}
        call = {"name": expected_function_name(name, True), "arguments": args}
        blocks.append(f"<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>")
    return "\n".join(blocks)
