"""Decode raw model output into BFCL's call list `[{func_name: {param: value}}, ...]`.

Two output styles are decoded, following the official BFCL handlers:
- prompt style: `[f(a=1), g(b='x')]` (a single call may omit the brackets; surrounding
  backticks, newlines and spaces are stripped), in Python, Java or JavaScript syntax;
- tool-call style: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks as the
  Qwen function-calling handler writes them.
`decode_output` raises `DecodeError` for every failure, which BFCL scores as "failed to decode".
Hostile output cannot stall it: outputs over `MAX_OUTPUT_CHARS` are refused, tags are found in
linear time, and the arithmetic BFCL evaluates is bounded (`MAX_INT_BITS`, `MAX_EVAL_SIZE`).
"""

from __future__ import annotations

import ast
import json
import operator
import re
from dataclasses import dataclass
from typing import Any

from slca.eval.bfcl.lang_parsers import parse_java_call, parse_javascript_call

MAX_OUTPUT_CHARS = 16_384  # 16x the longest gold answer (996); parsing this much garbage takes ~0.1 s
MAX_INT_BITS = 10_000  # ~3,000 digits, under Python's 4,300-digit str() limit
MAX_EVAL_SIZE = 100_000  # items + characters the arithmetic of one output may build
_MAX_EXPONENT = 1000  # keeps `10**10**10` from hanging the scorer
_OPEN_TAG, _CLOSE_TAG = "<tool_call>", "</tool_call>"
_FORMAT_SPEC = re.compile(r"[-+ #0]*(\*|[0-9]*)(?:\.(\*|[0-9]*))?")  # flags, width, precision
_BIN_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


class DecodeError(ValueError):
    """The output cannot be decoded (syntax, format or a size bound); BFCL's decoder_failed."""


@dataclass
class EvalBudget:
    """Items and characters the arithmetic of one output may still build (see `_size`)."""

    left: int = MAX_EVAL_SIZE

    def charge(self, size: int) -> None:
        """Spend `size`; raise `DecodeError` once the output's arithmetic builds too much."""
        self.left -= size
        if self.left < 0:
            raise DecodeError(
                f"arithmetic builds too large a value (limit {MAX_EVAL_SIZE} items/characters per output)"
            )


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
    budget = EvalBudget()
    if isinstance(tree.body, ast.Call):
        return [python_call_to_dict(tree.body, budget)]
    calls = []
    for element in tree.body.elts:  # AttributeError (no elts) means "not a call list"
        if not isinstance(element, ast.Call):
            raise ValueError(f"not a function call: {ast.unparse(element)}")
        calls.append(python_call_to_dict(element, budget))
    return calls


def python_call_to_dict(call: ast.Call, budget: EvalBudget | None = None) -> dict[str, dict[Any, Any]]:
    """`pkg.mod.f(a=1)` -> `{"pkg.mod.f": {"a": 1}}`; positional arguments are ignored."""
    budget = EvalBudget() if budget is None else budget
    parts = []
    node = call.func
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    name = ".".join(reversed(parts))
    return {name: {kw.arg: python_value(kw.value, budget) for kw in call.keywords}}


def python_value(node: ast.AST, budget: EvalBudget | None = None) -> Any:
    """Python value of an argument node, with BFCL's treatment of names, calls and subscripts."""
    budget = EvalBudget() if budget is None else budget
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        # BFCL negates the operand whatever the operator is.
        return -node.operand.value  # type: ignore[attr-defined]
    if isinstance(node, ast.List):
        return [python_value(item, budget) for item in node.elts]
    if isinstance(node, ast.Dict):
        return {python_value(k, budget): python_value(v, budget) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
    if isinstance(node, ast.BinOp):
        return arithmetic_value(node, budget)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else python_call_to_dict(node, budget)
    if isinstance(node, ast.Tuple):
        return tuple(python_value(item, budget) for item in node.elts)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise ValueError(f"unsupported AST type: {type(node).__name__}")


def arithmetic_value(node: ast.AST, budget: EvalBudget | None = None) -> Any:
    """Evaluate an arithmetic expression of literals (BFCL evaluates BinOp arguments).

    Every int is bounded by `MAX_INT_BITS` and what the operators build is charged to `budget`
    before it is built, so `[0]*10**9` or `'%09999999d'%1` raise `DecodeError` at once.
    """
    return _evaluate(node, EvalBudget() if budget is None else budget)[0]


def _size(value: Any) -> int:
    """Characters of a str/bytes, 1 + 64-bit words of an int (at most `MAX_INT_BITS`), else 1."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, int):
        return 1 + _int_bits(value) // 64
    return 1


def _int_bits(value: int) -> int:
    bits = value.bit_length()
    if bits > MAX_INT_BITS:
        raise DecodeError(f"integer of {bits} bits is too large (limit {MAX_INT_BITS} bits)")
    return bits


def _evaluate(node: ast.AST, budget: EvalBudget) -> tuple[Any, int]:
    """(value, size) of an arithmetic node; sizes let operators be priced without building."""
    if isinstance(node, ast.Constant):
        return node.value, _size(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value, size = _evaluate(node.operand, budget)
        return (-value if isinstance(node.op, ast.USub) else +value), size
    if isinstance(node, (ast.List, ast.Tuple)):
        pairs = [_evaluate(item, budget) for item in node.elts]
        items = [value for value, _ in pairs]
        return (items if isinstance(node, ast.List) else tuple(items)), 1 + sum(size for _, size in pairs)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN_OPS:
        left, right = _evaluate(node.left, budget), _evaluate(node.right, budget)
        size = _priced_size(node.op, left, right)
        budget.charge(size)
        result = _BIN_OPS[type(node.op)](left[0], right[0])
        if isinstance(result, (str, bytes, int)) and _size(result) > size:  # repr in %-formatting
            budget.charge(_size(result) - size)
            size = _size(result)
        return result, size
    raise ValueError(f"cannot evaluate expression: {ast.unparse(node)}")


def _priced_size(op: ast.operator, left: tuple[Any, int], right: tuple[Any, int]) -> int:
    """Upper bound (before %-formatting's repr) on the size of `left op right`."""
    (lvalue, lsize), (rvalue, rsize) = left, right
    if isinstance(op, ast.Pow) and isinstance(rvalue, (int, float)) and abs(rvalue) > _MAX_EXPONENT:
        raise DecodeError("exponent too large")
    if isinstance(lvalue, int) and isinstance(rvalue, int):
        return 1 + _int_result_bits(op, lvalue, rvalue) // 64
    if isinstance(op, ast.Mult) and isinstance(rvalue, int) and isinstance(lvalue, (str, bytes, list, tuple)):
        return lsize * max(rvalue, 0)
    if isinstance(op, ast.Mult) and isinstance(lvalue, int) and isinstance(rvalue, (str, bytes, list, tuple)):
        return rsize * max(lvalue, 0)
    if isinstance(op, ast.Mod) and isinstance(lvalue, (str, bytes)):
        return lsize + _format_widths(lvalue, rvalue) + rsize
    return lsize + rsize


def _int_result_bits(op: ast.operator, left: int, right: int) -> int:
    """Bound on the bits of `left op right` for ints; raises `DecodeError` above `MAX_INT_BITS`."""
    lbits, rbits = left.bit_length(), right.bit_length()
    if isinstance(op, ast.Pow):
        bits = lbits * right if right > 0 else 64  # a negative exponent gives a float
    elif isinstance(op, ast.Mult):
        bits = lbits + rbits
    else:
        bits = max(lbits, rbits) + 1
    if bits > MAX_INT_BITS:
        raise DecodeError(f"integer result of about {bits} bits is too large (limit {MAX_INT_BITS} bits)")
    return bits


def _format_widths(template: str | bytes, args: Any) -> int:
    """Sum of the widths and precisions in `template`'s %-conversions, `*` ones read from `args`."""
    text = template.decode("latin-1") if isinstance(template, bytes) else template
    star_args = [abs(arg) for arg in (args if isinstance(args, tuple) else (args,)) if isinstance(arg, int)]
    total, start = 0, text.find("%")
    while start != -1:
        position = _skip_mapping_key(text, start + 1)
        spec = _FORMAT_SPEC.match(text, position)
        for field in spec.groups():  # type: ignore[union-attr] - the pattern always matches
            if field == "*":
                total += sum(star_args)
            elif field:
                total += int(field) if len(field) <= 9 else MAX_EVAL_SIZE + 1
        start = text.find("%", spec.end() + 1)  # type: ignore[union-attr] - skip the conversion character
    return total


def _skip_mapping_key(text: str, position: int) -> int:
    """Index after a `(key)` at `position` (its parentheses nest, as in CPython), else `position`."""
    if not text.startswith("(", position):
        return position
    depth = 0
    for index in range(position, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index + 1
    return len(text)


def tool_call_blocks(raw: str) -> list[str]:
    """Stripped texts between each `<tool_call>` and the next `</tool_call>`, in linear time.

    The same blocks as `re.findall(r"<tool_call>\\s*(.*?)\\s*</tool_call>", raw, re.DOTALL)`,
    which backtracks cubically on an unclosed tag followed by a long run of whitespace.
    """
    blocks = []
    start = raw.find(_OPEN_TAG)
    while start != -1:
        end = raw.find(_CLOSE_TAG, start + len(_OPEN_TAG))
        if end == -1:
            break
        blocks.append(raw[start + len(_OPEN_TAG) : end].strip())
        start = raw.find(_OPEN_TAG, end + len(_CLOSE_TAG))
    return blocks


def decode_tool_call_output(raw: str) -> list[dict[str, Any]]:
    """Decode `<tool_call>` JSON blocks; blocks that are not valid JSON are skipped."""
    calls = []
    for block in tool_call_blocks(raw):
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

    `output_format` "auto" picks "json" when the text holds a `<tool_call>` block. Any failure,
    a bound included, raises `DecodeError` carrying the underlying message.
    """
    if output_format not in ("auto", "prompt", "json"):
        raise ValueError(f"unknown output format {output_format!r}; expected auto, prompt or json")
    if len(raw) > MAX_OUTPUT_CHARS:
        raise DecodeError(f"output of {len(raw)} characters is too long to decode (limit {MAX_OUTPUT_CHARS})")
    if output_format == "auto":
        output_format = "json" if uses_tool_call_tags(raw) else "prompt"
    try:
        if output_format == "json":
            return decode_tool_call_output(raw), "json"
        return decode_prompt_output(raw, language), "prompt"
    except DecodeError:
        raise
    except Exception as exc:  # every decoder failure is BFCL's "failed to decode"
        raise DecodeError(str(exc)) from exc


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
