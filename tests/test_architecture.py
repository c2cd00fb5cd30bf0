"""Import structure: `rollout` never imports `train`, `train` never imports `eval`, and `simulator` has no cycles.

Every import counts, module level and inside functions (a lazy import is still an arrow).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """slca module -> slca modules it imports (a `from package import name` names the package)."""
    modules = {_module_name(path): path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def cycles_within(graph: dict[str, set[str]], prefix: str) -> list[list[str]]:
    nodes = {n for n in graph if n == prefix or n.startswith(prefix + ".")}
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node] & nodes):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(nodes):
        if node not in state:
            visit(node, [node])
    return found


def test_graph_sees_lazy_imports():
    graph = import_graph()
    assert "slca.simulator.llm" in graph["slca.simulator.backends"]  # imported inside make_backend
    assert "slca.rollout.chat" in graph["slca.train.policy"]


def test_rollout_does_not_import_train():
    graph = import_graph()
    upward = {
        (m, t)
        for m, targets in graph.items()
        if m.startswith("slca.rollout")
        for t in targets
        if t.startswith("slca.train")
    }
    assert not upward


def test_simulator_has_no_import_cycles():
    assert cycles_within(import_graph(), "slca.simulator") == []


def test_train_does_not_import_eval():
    """The live-policy evaluation the learning curve and the sweep share lives in `rollout`, below both."""
    graph = import_graph()
    upward = {
        (m, t)
        for m, targets in graph.items()
        if m.startswith("slca.train")
        for t in targets
        if t.startswith("slca.eval")
    }
    assert not upward
    assert "slca.rollout.evaluation" in graph["slca.train.val_curve"]
    assert "slca.rollout.evaluation" in graph["slca.eval.indomain"]
