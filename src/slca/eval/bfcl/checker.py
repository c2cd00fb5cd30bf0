"""BFCL AST checker: compare decoded calls with the possible answers, rule for rule as BFCL does.

Each check returns `{"valid": bool, "error": [str, ...], "error_type": str}`; the error_type
strings are BFCL's own (e.g. "simple_function_checker:wrong_func_name", "type_error:simple",
"value_error:string", "parallel_function_checker_no_order:cannot_find_match").
"""

from __future__ import annotations

import re
from typing import Any

from slca.eval.bfcl.converters import JAVA_TYPES, JS_TYPES, java_value, js_value

PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
PYTHON_NESTED_TYPES = ("array", "tuple")
CONVERTED_NESTED_TYPES = ("Array", "ArrayList", "array")
_STANDARDIZE = re.compile(r"[ \,\.\/\-\_\*\^]")

Result = dict[str, Any]


def ok() -> Result:
    return {"valid": True, "error": []}


def fail(error_type: str, message: str) -> Result:
    return {"valid": False, "error": [message], "error_type": error_type}


def standardize_string(text: str) -> str:
    """Drop spaces and `,./-_*^`, lowercase, and turn single quotes into double quotes."""
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def _standardized(values: list[Any]) -> list[Any]:
    return [standardize_string(v) if type(v) is str else v for v in values]


def expected_function_name(name: str, underscore_to_dot: bool) -> str:
    """BFCL compares against `a_b` for `a.b` when the model was offered underscored names."""
    return re.sub(r"\.", "_", name) if underscore_to_dot and "." in name else name


def find_description(functions: list[dict[str, Any]] | dict[str, Any], name: str) -> dict[str, Any] | None:
    if isinstance(functions, list):
        return next((f for f in functions if f["name"] == name), None)
    return functions


def answer_type(possible: list[Any]) -> type | None:
    """Type of the first non-optional possible answer."""
    return next((type(answer) for answer in possible if answer != ""), None)


# ---------------------------------------------------------------- value checks


def type_check(
    param: str, value: Any, possible: list[Any], expected_name: str, expected: type, nested: type | None
) -> Result:
    """Type check with one level of nesting; a value of the answers' own type is a "variable"."""
    first_type = answer_type(possible)
    is_variable = first_type is not None and first_type != expected
    result: Result = {"valid": True, "error": [], "is_variable": False, "error_type": "type_error:simple"}
    if type(value) is expected:
        if nested is None:
            result["is_variable"] = is_variable
            return result
        for candidate in possible:
            if type(candidate) is not list or all(
                type_check(param, item, candidate, str(nested), nested, None)["valid"] for item in value
            ):
                return {"valid": True, "error": [], "is_variable": is_variable}
        message = (
            f"Nested type checking failed for parameter {param!r}. Expected outer type {expected_name} "
            f"with inner type {nested}. Parameter value: {value!r}."
        )
        result = {"valid": False, "is_variable": False, "error_type": "type_error:nested", "error": [message]}
    if first_type is not None and type(value) is first_type:
        result["is_variable"] = True
        return result
    result["valid"] = False
    result["error"].append(
        f"Incorrect type for parameter {param!r}. Expected type {expected_name}, "
        f"got {type(value).__name__}. Parameter value: {value!r}."
    )
    result["error_type"] = "type_error:simple"
    return result


def string_check(param: str, value: str, possible: list[Any]) -> Result:
    if standardize_string(value) not in [standardize_string(p) for p in possible if type(p) is str]:
        return fail(
            "value_error:string",
            (f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible}. Case insensitive."),
        )
    return ok()


def list_check(param: str, value: list[Any], possible: list[Any]) -> Result:
    if _standardized(list(value)) not in [_standardized(candidate) for candidate in possible]:
        return fail(
            "value_error:list/tuple", f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible}."
        )
    return ok()


def dict_check(param: str, value: dict[Any, Any], possible: list[Any]) -> Result:
    """One level of dict: every key must be allowed with an allowed value; "" marks optional keys."""
    result = fail("dict_checker:unclear", "")
    result["error"] = []
    for candidate in possible:
        if candidate == "":
            continue
        result = _dict_against(value, candidate)
        if result["valid"]:
            return result
    return result


def _dict_against(value: dict[Any, Any], candidate: dict[str, list[Any]]) -> Result:
    for key, item in value.items():
        if key not in candidate:
            return fail("value_error:dict_key", f"Unexpected dict key parameter: '{key}'.")
        allowed = _standardized(candidate[key])
        if (standardize_string(item) if type(item) is str else item) not in allowed:
            return fail(
                "value_error:dict_value", f"Invalid value for parameter {key!r}: {item!r}. Expected one of {allowed}."
            )
    for key, allowed in candidate.items():
        if key not in value and "" not in allowed:
            return fail("value_error:dict_key", f"Missing dict key parameter: '{key}'.")
    return ok()


def list_dict_check(param: str, value: list[Any], possible: list[Any]) -> Result:
    """A list of dicts, matched in order against each candidate list."""
    result = fail("list_dict_checker:unclear", "")
    result["error"] = []
    for candidate in possible:
        if len(value) != len(candidate):
            result = fail("value_error:list_dict_count", "Wrong number of dictionaries in the list.")
            continue
        for item, candidate_item in zip(value, candidate):
            result = dict_check(param, item, [candidate_item])
            if not result["valid"]:
                break
        else:
            return ok()
    return result


# ---------------------------------------------------------------- call checks


def _converted_value(
    param: str, value: Any, details: dict[str, Any], language: str
) -> tuple[Any, type, type | None, Result | None]:
    """(value, expected type, nested type, type error) after the language's conversion step."""
    declared = details["type"]
    if language == "Python":
        nested = PYTHON_TYPES[details["items"]["type"]] if declared in PYTHON_NESTED_TYPES else None
        return value, PYTHON_TYPES[declared], nested, None
    types, convert, tag = (JAVA_TYPES, java_value, "java") if language == "Java" else (JS_TYPES, js_value, "js")
    expected = types[declared]
    if type(value) is not str:
        return (
            value,
            expected,
            None,
            fail(
                f"type_error:{tag}",
                (
                    f"Incorrect type for parameter {param!r}. Expected type String, "
                    f"got {type(value).__name__}. Parameter value: {value!r}."
                ),
            ),
        )
    if declared in CONVERTED_NESTED_TYPES:
        item_type = details["items"]["type"]
        return convert(value, declared, item_type), expected, types[item_type], None
    return convert(value, declared), expected, None, None


def simple_function_check(
    description: dict[str, Any], call: dict[str, Any], answer: dict[str, Any], language: str, underscore_to_dot: bool
) -> Result:
    """Check one decoded call against one possible answer `{name: {param: [allowed values]}}`."""
    possible = next(iter(answer.values()))
    properties = description["parameters"]["properties"]
    name = expected_function_name(description["name"], underscore_to_dot)
    if name not in call:
        return fail("simple_function_checker:wrong_func_name", f"Function name {name!r} not found in model output.")
    arguments = call[name]
    for param in description["parameters"]["required"]:
        if param not in arguments:
            return fail("simple_function_checker:missing_required", f"Missing required parameter: {param!r}.")
    for param, value in arguments.items():
        if param not in properties or param not in possible:
            return fail("simple_function_checker:unexpected_param", f"Unexpected parameter: {param!r}.")
        details = properties[param]
        value, expected, nested, error = _converted_value(param, value, details, language)
        if error is not None:
            return error
        if details["type"] == "tuple" and type(value) is tuple:
            value = list(value)  # answers went through JSON, where tuples became lists
        if language == "Python" and details["type"] == "float" and type(value) is int:
            value = float(value)
        typed = type_check(param, value, possible[param], details["type"], expected, nested)
        if not typed["valid"]:
            return typed
        result = _value_check(param, value, possible[param], expected, nested, typed["is_variable"])
        if not result["valid"]:
            return result
    for param in possible:
        if param not in arguments and "" not in possible[param]:
            return fail(
                "simple_function_checker:missing_optional",
                f"Optional parameter {param!r} not provided and not marked as optional.",
            )
    return {"valid": True, "error": []}


def _value_check(
    param: str, value: Any, allowed: list[Any], expected: type, nested: type | None, is_variable: bool
) -> Result:
    if not is_variable:
        if expected is dict:
            return dict_check(param, value, allowed)
        if expected is list and nested is dict:
            return list_dict_check(param, value, allowed)
        if expected is str:
            return string_check(param, value, allowed)
        if expected is list:
            return list_check(param, value, allowed)
    if value not in allowed:
        return fail(
            "value_error:others", f"Invalid value for parameter {param!r}: {value!r}. Expected one of {allowed}."
        )
    return ok()


def parallel_no_order_check(
    functions: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    language: str,
    underscore_to_dot: bool,
) -> Result:
    """Each possible answer must match a distinct call; order does not matter (greedy, as BFCL)."""
    if len(calls) != len(answers):
        return fail("parallel_function_checker_no_order:wrong_count", "Wrong number of functions.")
    matched: set[int] = set()
    for answer_index, answer in enumerate(answers):
        description = find_description(functions, next(iter(answer)))
        result: Result | None = None
        for index, call in enumerate(calls):
            if index in matched:
                continue
            result = simple_function_check(description, call, answer, language, underscore_to_dot)  # type: ignore[arg-type]
            if result["valid"]:
                matched.add(index)
                break
        if result is not None and not result["valid"]:
            remaining = [i for i in range(len(calls)) if i not in matched]
            return fail(
                "parallel_function_checker_no_order:cannot_find_match",
                (
                    f"Could not find a matching function among index {remaining} of model output "
                    f"for index {answer_index} of possible answers."
                ),
            )
    return {"valid": True, "error": []}


def multiple_check(
    functions: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    language: str,
    underscore_to_dot: bool,
) -> Result:
    """One call expected among several offered functions."""
    if len(calls) != len(answers):
        return fail("multiple_function_checker:wrong_count", "Wrong number of functions.")
    description = find_description(functions, next(iter(answers[0])))
    return simple_function_check(description, calls[0], answers[0], language, underscore_to_dot)  # type: ignore[arg-type]


def ast_check(
    functions: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    answers: list[dict[str, Any]],
    language: str,
    category: str,
    underscore_to_dot: bool = False,
) -> Result:
    """Dispatch on the category name as BFCL does ("parallel" first, then "multiple", else simple)."""
    if "parallel" in category:
        return parallel_no_order_check(functions, calls, answers, language, underscore_to_dot)
    if "multiple" in category:
        return multiple_check(functions, calls, answers, language, underscore_to_dot)
    if len(calls) != 1:
        return fail("simple_function_checker:wrong_count", "Wrong number of functions.")
    return simple_function_check(functions[0], calls[0], answers[0], language, underscore_to_dot)
