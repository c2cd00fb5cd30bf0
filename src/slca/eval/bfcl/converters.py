"""Java and JavaScript value converters: argument source text -> typed Python value, as BFCL does.

A text that does not fit the expected type is returned unchanged as a string, so the checker
later reports a type or value error rather than a crash.
"""

from __future__ import annotations

import re
from typing import Any

JAVA_TYPES: dict[str, type] = {
    "byte": int,
    "short": int,
    "integer": int,
    "float": float,
    "double": float,
    "long": int,
    "boolean": bool,
    "char": str,
    "Array": list,
    "ArrayList": list,
    "Set": set,
    "HashMap": dict,
    "Hashtable": dict,
    "Queue": list,
    "Stack": list,
    "String": str,
    "any": str,
}
JS_TYPES: dict[str, type] = {
    "String": str,
    "integer": int,
    "float": float,
    "Bigint": int,
    "Boolean": bool,
    "dict": dict,
    "array": list,
    "any": str,
}

_INT = re.compile(r"^-?\d+$")
_JAVA_FLOAT = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?[fF]$")
_JAVA_DOUBLE = re.compile(r"^-?\d+(\.\d+)?([eE][+-]?\d+)?$")
_JAVA_LONG = re.compile(r"^-?\d+[lL]$")
_JAVA_CHAR = re.compile(r"^\'.$\'")  # BFCL's pattern can never match, so char text stays as written

# ---------------------------------------------------------------- Java


def java_value(text: str, expected: str, nested: str | None = None) -> Any:
    """Convert Java source text to the value BFCL compares for type `expected`."""
    if expected not in JAVA_TYPES:
        raise ValueError(f"unsupported Java type: {expected}")
    if expected in ("byte", "short", "integer"):
        return int(text) if _INT.match(text) else str(text)
    if expected == "float":
        return float(re.sub(r"[fF]$", "", text)) if _JAVA_FLOAT.match(text) else str(text)
    if expected == "double":
        return float(text) if _JAVA_DOUBLE.match(text) else str(text)
    if expected == "long":
        return int(re.sub(r"[lL]$", "", text)) if _JAVA_LONG.match(text) else str(text)
    if expected == "boolean":
        return text == "true" if text in ("true", "false") else str(text)
    if expected == "char":
        return text if _JAVA_CHAR.match(text) else str(text)
    if expected == "ArrayList":
        return java_arraylist(text, nested)
    if expected == "Array":
        return java_array(text, nested)
    if expected == "HashMap":
        return java_hashmap(text)
    if expected in ("Set", "Hashtable", "Queue", "Stack"):
        raise NotImplementedError(f"{expected} conversion is not implemented")
    return str(text)  # String and any


def _java_element(text: str, nested: str | None) -> Any:
    if nested in ("char", "String"):
        return text[1:-1]  # ArrayList elements of these types only lose their quotes
    return java_value(text, nested) if nested else java_literal(text)


def java_arraylist(text: str, nested: str | None = None) -> Any:
    """`new ArrayList<>(Arrays.asList(a, b))`, `new ArrayList<>() {{ add(a); }}` or an empty one."""
    as_list = re.search(r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)", text)
    if as_list:
        return [_java_element(part.strip(), nested) for part in as_list.group(1).split(",")]
    with_adds = re.search(r"new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}", text, re.DOTALL)
    if with_adds:
        return [_java_element(item.strip(), nested) for item in re.findall(r"add\((.+?)\)", with_adds.group(1))]
    if re.search(r"new\s+ArrayList<\w*>\(\)", text):
        return []
    return text


def java_array(text: str, nested: str | None = None) -> Any:
    """`new T[]{a, b}`; elements are converted by `nested` (string elements keep their quotes)."""
    match = re.search(r"new\s+\w+\[\]\s*\{(.*?)\}", text)
    if not match:
        return text
    parts = [part.strip() for part in match.group(1).split(",") if part.strip()]
    return [java_value(part, nested) if nested else java_literal(part) for part in parts]


def java_hashmap(text: str) -> Any:
    """`new HashMap<..>() {{ put("k", v); }}` or an empty HashMap."""
    match = re.search(r"new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}", text, re.DOTALL)
    if match:
        puts = match.group(1)
        if not puts.strip():
            return {}
        return {key: java_literal(value.strip()) for key, value in re.findall(r"put\(\"(.*?)\",\s*(.*?)\)", puts)}
    if re.search(r"new\s+HashMap<.*?>\s*\(\)", text):
        return {}
    return text


def java_literal(text: str) -> Any:
    """A Java literal without a declared type: boolean, string, long, float, int, double, else text."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"') and text.endswith('"'):
        return text[1:-1]
    if _JAVA_LONG.match(text):
        return int(text[:-1])
    if _JAVA_FLOAT.match(text):
        return float(re.sub(r"[fF]$", "", text))
    return _number_or_text(text)


def _number_or_text(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


# ---------------------------------------------------------------- JavaScript


def js_value(text: str, expected: str, nested: str | None = None) -> Any:
    """Convert JavaScript source text to the value BFCL compares for type `expected`."""
    if expected not in JS_TYPES:
        raise ValueError(f"unsupported JavaScript type: {expected}")
    if expected == "String":
        quoted = (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))
        return text[1:-1] if quoted else str(text)
    if expected == "integer":
        return int(text) if _INT.match(text) else str(text)
    if expected == "float":
        return float(text) if re.match(r"^-?\d+(\.\d+)?$", text) else str(text)
    if expected == "Bigint":
        return int(text[:-1]) if re.match(r"^-?\d+n$", text) else str(text)
    if expected == "Boolean":
        return text == "true" if text in ("true", "false") else str(text)
    if expected == "dict":
        return js_object(text.strip())
    if expected == "array":
        return js_array(text.strip(), nested)
    return str(text)  # any


#: the official checker's two-level pattern. Its nested lazy `.*?` backtracks exponentially
#: ("[" + "[1]," * n + "[1] x": 12 s at 94 characters), so it is never run on a model's output:
#: `match_js_array_2d` returns the same match in linear time (and the tests hold the two equal).
_JS_ARRAY_2D = re.compile(r"\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\)")
_JS_ARRAY = re.compile(r"\[(.*?)\]|\bnew\s+Array\((.*?)\)")
_NEW_ARRAY = re.compile(r"new\s+Array\(")  # alternative 2's head: `\b` holds at 0 before "n"; linear


def match_js_array_2d(code: str) -> str | None:
    r"""`_JS_ARRAY_2D.match(code).group(0)` (or None), computed in O(len(code)).

    In the pattern only the lazy items `\[.*?\]` and the greedy item loop choose; every `\s*`
    is followed by a non-space literal, so it takes all the whitespace there is. The backtracking
    order is: an item ends at its first `]` from which the rest matches (`.` stops at "\n"),
    and the loop takes another item when a "," follows. So with, per position i, END[i] = the end
    of the first successful completion from the loop point i (None: none), and GOOD[k] = the
    first `]` at or after k, before any newline, whose loop point (the next non-space after it)
    completes, one right-to-left pass fills both tables: the match is END at the loop point
    after the first item's GOOD `]`.
    """
    n = len(code)
    if code.startswith("["):
        start, close = 1, "]"
    else:
        head = _NEW_ARRAY.match(code)
        if not head:
            return None
        start, close = head.end(), ")"
    while start < n and code[start].isspace():
        start += 1
    if start >= n or code[start] != "[":
        return None
    following = [n] * (n + 2)  # following[p]: first non-space index >= p (n: none)
    end: list[int | None] = [None] * (n + 2)
    good: list[int | None] = [None] * (n + 2)
    for p in range(n - 1, start, -1):
        following[p] = following[p + 1] if code[p].isspace() else p
        char = code[p]
        if char == close:
            end[p] = p + 1
        elif char == ",":
            bracket = following[p + 1]
            item_end = good[bracket + 1] if bracket < n and code[bracket] == "[" else None
            end[p] = None if item_end is None else end[following[item_end + 1]]
        if char == "\n":
            good[p] = None
        elif char == "]" and end[following[p + 1]] is not None:
            good[p] = p
        else:
            good[p] = good[p + 1]
    first = good[start + 1]
    if first is None:
        return None
    stop = end[following[first + 1]]
    return None if stop is None else code[:stop]


def _bracket_bodies(text: str) -> list[str]:
    r"""`re.findall(r"\[(.*?)\]", text)` in linear time (a failed start skips to its line's end)."""
    bodies, position = [], 0
    while True:
        opening = text.find("[", position)
        if opening < 0:
            return bodies
        closing = text.find("]", opening + 1)
        if closing < 0:
            return bodies
        newline = text.find("\n", opening + 1, closing)
        if newline >= 0:
            position = newline + 1
            continue
        bodies.append(text[opening + 1 : closing])
        position = closing + 1


def js_array(code: str, nested: str | None = None) -> Any:
    """`[a, b]`, `new Array(a, b)` or a two-level array; any failure returns the text."""
    try:
        two_level = match_js_array_2d(code)
        if two_level is not None:
            rows = []
            for index, inner in enumerate(_bracket_bodies(two_level)):
                inner = inner.strip()
                if index == 0 and inner.startswith("["):
                    inner = inner[1:]
                rows.append([js_literal(item.strip()) for item in inner.split(",")])
            return rows
        flat = _JS_ARRAY.match(code)
        if not flat:
            return code
        body = flat.group(1) if flat.group(1) is not None else flat.group(2)
        items = body.strip().split(",") if body is not None and body.strip() else []
        if not nested:
            return [js_literal(item.strip()) for item in items]
        return [_js_typed_element(item.strip(), nested) for item in items]
    except Exception:  # noqa: BLE001 - BFCL returns the raw text on any conversion failure
        return code


def _js_typed_element(item: str, nested: str) -> Any:
    if item.startswith(("'", '"')):
        return js_value(item, nested, "String")
    return js_value(item, nested)


def js_object(code: str) -> Any:
    """`{k: v, ...}` with one level of nested arrays/objects; anything else returns the text."""
    if code == "{}":
        return {}
    match = re.match(r"\{(.*?)\}", code)
    if not match:
        return code
    try:
        result: dict[str, Any] = {}
        for key, value in re.findall(r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)", match.group(1)):
            key, value = key.strip().strip("'\""), value.strip()
            if value.startswith("[") and value.endswith("]"):
                result[key] = js_array(value)
            elif value.startswith("{") and value.endswith("}"):
                result[key] = js_object(value)
            else:
                result[key] = js_literal(value.strip("'\""))
        return result
    except Exception:  # noqa: BLE001 - as above: unparsable objects stay text
        return code


def js_literal(text: str) -> Any:
    """A JavaScript literal without a declared type: boolean, quoted string, int, float, else text."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 1 and (
        (text.startswith('"') and text.endswith('"')) or (text.startswith("'") and text.endswith("'"))
    ):
        return text[1:-1]
    return _number_or_text(text)
