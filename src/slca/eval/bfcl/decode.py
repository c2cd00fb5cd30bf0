"""Decode raw model output into BFCL's call list `[{func_name: {param: value}}, ...]`.

Two output styles are decoded, following the official BFCL handlers:
- prompt style: `[f(a=1), g(b='x')]` (a single call may omit the brackets; surrounding
  backticks, newlines and spaces are stripped), in Python, Java or JavaScript syntax;
- tool-call style: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks as the
  Qwen function-calling handler writes them.
Any exception raised here means "failed to decode", which BFCL scores as such.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from typing import Any

from slca.eval.bfcl.lang_parsers import parse_java_call, parse_javascript_call

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_BIN_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_MAX_EXPONENT = 1000  # keeps `10**10**10` from hanging the scorer


def wrap_prompt_output(raw: str) -> str:
    """Strip backticks/newlines/spaces at both ends and make sure the text is bracketed."""
    text = raw.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    return text


def decode_prompt_output(raw: str, language: str = "Python") -> Any:
    """Decode prompt-style output in `language` (Python, Java or JavaScript)."""
    text = wrap_prompt_output(raw)
    if language == "Python":
        return parse_python_calls(text)
    # BFCL drops the first and last character (the brackets) before parsing Java/JS.
    if language == "Java":
        return parse_java_call(text[1:-1])
    if language == "JavaScript":
        return parse_javascript_call(text[1:-1])
    raise ValueError(f"unsupported language {language!r}")


def parse_python_calls(text: str) -> list[dict[str, Any]]:
    """Parse a Python call or list of calls; only keyword arguments are kept."""
    tree = ast.parse(text.strip().strip("'"), mode="eval")
    if isinstance(tree.body, ast.Call):
        return [python_call_to_dict(tree.body)]
    calls = []
    for element in tree.body.elts:  # AttributeError (no elts) means "not a call list"
        if not isinstance(element, ast.Call):
            raise ValueError(f"not a function call: {ast.unparse(element)}")  # noqa: TRY004 - a decode failure
        calls.append(python_call_to_dict(element))
    return calls


def python_call_to_dict(call: ast.Call) -> dict[str, dict[Any, Any]]:
    """`pkg.mod.f(a=1)` -> `{"pkg.mod.f": {"a": 1}}`; positional arguments are ignored."""
    parts = []
    node = call.func
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    name = ".".join(reversed(parts))
    return {name: {kw.arg: python_value(kw.value) for kw in call.keywords}}


def python_value(node: ast.AST) -> Any:
    """Python value of an argument node, with BFCL's treatment of names, calls and subscripts."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # BFCL negates the operand whatever the operator is.
        return -node.operand.value  # type: ignore[attr-defined]
    if isinstance(node, ast.List):
        return [python_value(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        return {python_value(k): python_value(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp):
        return arithmetic_value(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else python_call_to_dict(node)
    if isinstance(node, ast.Tuple):
        return tuple(python_value(item) for item in node.elts)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise ValueError(f"unsupported AST type: {type(node).__name__}")


def arithmetic_value(node: ast.AST) -> Any:
    """Evaluate an arithmetic expression of literals (BFCL evaluates BinOp arguments)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = arithmetic_value(node.operand)
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [arithmetic_value(item) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
        left, right = arithmetic_value(node.left), arithmetic_value(node.right)
        if isinstance(node.op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > _MAX_EXPONENT:
            raise ValueError("exponent too large")
        return _BIN_OPS[type(node.op)](left, right)
    raise ValueError(f"cannot evaluate expression: {ast.unparse(node)}")


def decode_tool_call_output(raw: str) -> list[dict[str, Any]]:
    """Decode `<tool_call>` JSON blocks; blocks that are not valid JSON are skipped."""
    calls = []
    for block in _TOOL_CALL_BLOCK.findall(raw):
        try:
            calls.append(json.loads(block))
        except json.JSONDecodeError:
            continue
    if any(not isinstance(call, dict) for call in calls):
        raise ValueError("a tool call is not a JSON object")
    return [{call["name"]: dict(call["arguments"].items())} for call in calls]


def uses_tool_call_tags(raw: str) -> bool:
    """True when the output is written as `<tool_call>` blocks."""
    return "<tool_call>" in raw


def decode_output(raw: str, language: str, output_format: str = "auto") -> tuple[Any, str]:
    """Decode `raw` and return (decoded, format used) with format "prompt" or "json".

    `output_format` "auto" picks "json" when the text holds a `<tool_call>` block.
    """
    if output_format == "auto":
        output_format = "json" if uses_tool_call_tags(raw) else "prompt"
    if output_format == "json":
        return decode_tool_call_output(raw), "json"
    if output_format == "prompt":
        return decode_prompt_output(raw, language), "prompt"
    raise ValueError(f"unknown output format {output_format!r}; expected auto, prompt or json")


def is_call_list(decoded: Any) -> bool:
    """BFCL's format check: a list of one-key dicts mapping a name to a dict of arguments."""
    if type(decoded) is not list:
        return False
    return all(type(item) is dict and len(item) == 1 and type(next(iter(item.values()))) is dict for item in decoded)


def is_empty_call_list(decoded: Any) -> bool:
    """No call made: not in call-list format, `[]`, or `[{}]`."""
    if not is_call_list(decoded):
        return True
    return len(decoded) == 0 or (len(decoded) == 1 and len(decoded[0]) == 0)
