"""The design's arrows, checked on the source (docs/architecture.md draws them).

Every ``import`` in ``agenthost/``, ``providers/`` and ``policies/`` (installed and imported
as ``agenthost_providers`` and ``agenthost_policies``) is read with :mod:`ast`
(function-level and ``TYPE_CHECKING`` imports included: a type import is still an arrow a
reader must follow), and each layer's rule is checked. A new arrow that breaks a rule fails
here with the importing file and line, before it becomes a circle someone must untangle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Each package's import name and its folder: providers/ and policies/ are installed under
#: collision-safe names (pyproject.toml's wheel ``sources``).
PACKAGES = {
    "agenthost": "agenthost",
    "agenthost_providers": "providers",
    "agenthost_policies": "policies",
}


@attrs.frozen
class Arrow:
    source: str  # the importing module
    target: str  # the imported module (or package), resolved to one of ours if it is ours
    where: str  # file:line


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _ours(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _arrows(module: str, path: Path) -> Iterator[Arrow]:
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Arrow(module, _ours(alias.name) or alias.name, where)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            # `from pkg import mod` is an arrow to pkg.mod; `from pkg import name` to pkg
            subs = [f"{base}.{alias.name}" for alias in node.names]
            hits = {sub for sub in subs if sub in MODULES}
            for hit in sorted(hits):
                yield Arrow(module, hit, where)
            if len(hits) < len(subs):
                yield Arrow(module, _ours(base) or base, where)


ARROWS = [
    arrow
    for module, path in MODULES.items()
    for arrow in _arrows(module, path)
    if arrow.target != module
]


def _under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


#: (the layer, what it may not import, why)
RULES: list[tuple[str, tuple[str, ...], str]] = [
    (
        "agenthost.protocol",
        (
            "trio",
            "trio_websocket",
            "anyio",
            "httpx",
            "httpx2",
            "agenthost.transports",
            "agenthost.rpc",
            "agenthost.session",
            "agenthost.config",
            "agenthost.host",
            "agenthost.cli",
            "agenthost.auth",
        ),
        "the protocol is sans-I/O: bytes and dicts in, events out, for any runtime",
    ),
    (
        "agenthost.transports",
        (
            "agenthost.config",
            "agenthost.auth",
            "agenthost.protocol.methods",
            "agenthost.session",
            "agenthost.connection",
            "agenthost.host",
            "agenthost.cli",
        ),
        "a transport moves messages; what they mean and where they came from is above it",
    ),
    (
        "agenthost.agent",
        ("agenthost.host", "agenthost.cli", "agenthost.config"),
        "the agent runs over a ToolHost protocol, so a durable runtime can drive it too",
    ),
    (
        "agenthost.host",
        ("agenthost.cli", "agenthost.serve"),
        "the library never imports its own command line, nor the gateway built on it",
    ),
    (
        "agenthost.serve",
        (
            "agenthost.cli",
            "agenthost.session",
            "agenthost.connection",
            "agenthost.mrtr",
            "agenthost.auth",
        ),
        "the gateway reaches upstreams through the host's public API only, so the client"
        " side can change underneath it",
    ),
]


#: Arrows that break a rule today, each removed by a step of the re-layering (issue 23);
#: the list only shrinks (a stale entry fails :func:`test_the_allow_lists_only_shrink`).
ALLOWED_ARROWS: set[tuple[str, str]] = set()


def _broken(layer: str, banned: tuple[str, ...]) -> list[Arrow]:
    return [
        a
        for a in ARROWS
        if _under(a.source, layer)
        and _under(a.target, *banned)
        and (a.source, a.target) not in ALLOWED_ARROWS
    ]


@pytest.mark.parametrize(("layer", "banned", "why"), RULES, ids=[r[0] for r in RULES])
def test_layer_imports_nothing_above_it(layer: str, banned: tuple[str, ...], why: str) -> None:
    assert any(_under(m, layer) for m in MODULES), f"no module under {layer}: the rule is stale"
    broken = [f"{a.where}: {a.source} imports {a.target}" for a in _broken(layer, banned)]
    assert not broken, f"{layer}: {why}\n" + "\n".join(broken)


def test_the_allow_lists_only_shrink() -> None:
    present = {(a.source, a.target) for a in ARROWS}
    stale = sorted(ALLOWED_ARROWS - present)
    assert not stale, f"arrows no longer drawn: remove them from ALLOWED_ARROWS: {stale}"


@pytest.mark.parametrize("package", ["agenthost_providers", "agenthost_policies"])
def test_plugins_import_only_errors_from_agenthost(package: str) -> None:
    """Providers and policies are the parts users replace; they see plain types and errors."""
    broken = [
        f"{a.where}: {a.source} imports {a.target}"
        for a in ARROWS
        if _under(a.source, package)
        and _under(a.target, "agenthost")
        and a.target != "agenthost.errors"
    ]
    assert not broken, "\n".join(broken)


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for a in ARROWS:
        if a.target in MODULES:
            graph[a.source].add(a.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


#: Import circles that exist today, each to be broken by a step of the re-layering; the
#: list only shrinks (an entry that no longer matches a circle fails the test too).
ALLOWED_CYCLES: list[list[str]] = []


def test_no_import_cycles() -> None:
    cycles = _cycles()
    new = [c for c in cycles if c not in ALLOWED_CYCLES]
    assert not new, "import circles:\n" + "\n".join(" <-> ".join(c) for c in new)
    gone = [c for c in ALLOWED_CYCLES if c not in cycles]
    assert not gone, "broken circles still on the allow-list (remove them):\n" + "\n".join(
        " <-> ".join(c) for c in gone
    )


def test_the_checker_reads_the_imports() -> None:
    """The checks above could pass by reading nothing; this one proves they read."""
    assert len(ARROWS) > 200
    assert any(a.source == "agenthost.session" and a.target == "agenthost.rpc" for a in ARROWS)
    assert any(_under(a.target, "trio") for a in ARROWS if a.source == "agenthost.rpc")


def _imported_names(path: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module, node.lineno


@pytest.mark.parametrize(
    "folder", ["agenthost", "providers", "policies", "tests", "bench", "examples"]
)
def test_nothing_imports_a_folder_by_its_name(folder: str) -> None:
    """providers/ and policies/ are imported as agenthost_providers and agenthost_policies.

    An import by the folder's name still works in a checkout (its root is on sys.path) but
    fails in the installed wheel, which has no top-level ``providers`` or ``policies``.
    """
    broken = [
        f"{path.relative_to(ROOT)}:{line}: import {name}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name, line in _imported_names(path)
        if _under(name, *(f for p, f in PACKAGES.items() if p != f))
    ]
    assert not broken, "import agenthost_providers / agenthost_policies instead:\n" + "\n".join(
        broken
    )
