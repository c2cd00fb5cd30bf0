"""Java and JavaScript call parsers on tree-sitter grammars, as BFCL decodes those languages.

Both return `[{func_name: {param: value_text}}]` where each value is the argument's source text
(string literals lose their quotes at the top level only); the type converters turn that text
into typed values later. A parse tree holding an ERROR node is a syntax error.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import tree_sitter_java
import tree_sitter_javascript
from tree_sitter import Language, Node, Parser


@cache
def _parser(language: str) -> Parser:
    grammar = tree_sitter_java.language() if language == "java" else tree_sitter_javascript.language()
    return Parser(Language(grammar))


def _parse(source: str, language: str) -> Node:
    root = _parser(language).parse(source.encode("utf-8")).root_node
    if "ERROR" in str(root):  # str(node) is the tree's s-expression
        raise SyntaxError(f"cannot parse the {language} source code")
    return root


def _text(node: Node) -> str:
    return node.text.decode("utf-8") if node.text is not None else ""


def _add_argument(arguments: dict[Any, Any], name: Any, value: str) -> None:
    if name in arguments:
        raise ValueError("multiple arguments with the same name are not supported")
    arguments[name] = value


# ---------------------------------------------------------------- Java


def java_value_text(node: Node, nested: bool = False) -> str:
    """Source text of a Java argument value, rebuilt the way BFCL's Java parser does."""
    if node.type in ("string_literal", "character_literal"):
        return _text(node) if nested else _text(node)[1:-1]
    if node.type in ("identifier", "class_literal", "type_identifier", "method_invocation"):
        return _text(node)
    if node.type == "array_creation_expression":
        type_text = java_value_text(node.child_by_field_name("type"), True)  # type: ignore[arg-type]
        value_text = java_value_text(node.child_by_field_name("value"), True)  # type: ignore[arg-type]
        return f"new {type_text}[]{value_text}"
    if node.type == "object_creation_expression":
        # An anonymous class body (e.g. `{{ put(..); }}`) is dropped, as in BFCL.
        type_text = java_value_text(node.child_by_field_name("type"), True)  # type: ignore[arg-type]
        arguments = node.child_by_field_name("arguments")
        if arguments is None:
            return f"new {type_text}()"
        parts = [java_value_text(child, True) for child in arguments.children if child.type not in (",", "(", ")")]
        return f"new {type_text}({', '.join(parts)})"
    if node.type == "set":
        items = [java_value_text(child, True) for child in node.children if child.type not in (",", "set")]
        return "{" + ", ".join(items) + "}"
    if node.child_count > 0:
        return "".join(java_value_text(child, True) for child in node.children)
    return _text(node)


def _java_arguments(arguments_node: Node) -> dict[Any, str]:
    arguments: dict[Any, str] = {}
    for child in arguments_node.children:
        if child.type == "assignment_expression":
            _add_argument(arguments, _text(child.children[0]), java_value_text(child.children[2]))
        elif child.type in ("identifier", "class_literal", "set"):
            _add_argument(arguments, None, java_value_text(child))
    return arguments


def _first_java_call(node: Node) -> list[dict[str, Any]] | None:
    if node.type == "method_invocation":
        method = _text(node.child_by_field_name("name"))  # type: ignore[arg-type]
        owner = node.child_by_field_name("object")
        name = f"{_text(owner)}.{method}" if owner is not None else method
        arguments = node.child_by_field_name("arguments")
        # BFCL returns nothing from a call node without an argument list and keeps searching.
        return [{name: _java_arguments(arguments)}] if arguments is not None else None
    for child in node.children:
        found = _first_java_call(child)
        if found:
            return found
    return None


def parse_java_call(source: str) -> Any:
    """First Java method invocation in `source`; `{}` when there is none (as BFCL returns)."""
    return _first_java_call(_parse(source, "java")) or {}


# ---------------------------------------------------------------- JavaScript


def _unquote_js(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _js_arguments(arguments_node: Node) -> dict[Any, str]:
    arguments: dict[Any, str] = {}
    for child in arguments_node.children:
        if child.type == "assignment_expression":
            _add_argument(arguments, _text(child.children[0]), _unquote_js(_text(child.children[2])))
        elif child.type in ("identifier", "true"):
            _add_argument(arguments, None, _text(child))
    return arguments


def parse_javascript_call(source: str) -> Any:
    """First top-level JavaScript call expression; None when there is none (as BFCL returns)."""
    root = _parse(source, "javascript")
    if root.type != "program":
        return None
    for statement in root.children:
        if statement.type != "expression_statement":
            continue
        for expression in statement.children:
            if expression.type == "call_expression":
                name = _text(expression.children[0])
                return [{name: _js_arguments(expression.children[1])}]
    return None
