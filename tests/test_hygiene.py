"""The tests test through public surfaces, checked on the source (issue 23, item 6).

Why: a test that imports ``_name`` or reads ``obj._state`` pins an implementation detail,
so every refactor breaks it although nothing a user sees changed; and a test module that
imports another test module makes a run of one file depend on the other's collection.
Every test file is read with :mod:`ast`; shared helpers live in tests/helpers.py.

Private *state* is still read in a few places, listed in :data:`KNOWN_PRIVATE_STATE`
(file, attribute) with what would replace it: the list may only shrink.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
OURS = ("agenthost", "agenthost_providers", "agenthost_policies", "tests")

#: Private attributes still read by tests, each to be replaced by a public accessor or by
#: observing behaviour (issue 23, item 6). Remove an entry once its file is clean.
KNOWN_PRIVATE_STATE: frozenset[tuple[str, str]] = frozenset()

#: Private names of the standard library and peers' SDKs that are the documented way.
_ALLOWED_ATTRIBUTES = frozenset({"_exit", "_lowlevel_server"})


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if not node.module.startswith(OURS):
                continue
            for alias in node.names:
                if _private(alias.name):
                    yield f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{alias.name}"


def _test_module_imports(path: Path) -> Iterator[tuple[str, str, int]]:
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            if any(part.startswith("test_") for part in name.split(".")):
                yield str(path.relative_to(ROOT)), name, node.lineno


def _private_attributes(path: Path) -> Iterator[tuple[str, str, int]]:
    """``obj._name`` where ``obj`` is not the class's own ``self``/``cls``/``super()``."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        if node.attr in _ALLOWED_ATTRIBUTES:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in {"self", "cls"}:
            continue
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "super":
            continue
        yield str(path.relative_to(ROOT)), node.attr, node.lineno


def test_no_test_imports_a_private_name() -> None:
    found = [hit for path in _test_files() for hit in _private_imports(path)]
    assert found == [], "tests import private names (observe public behaviour instead)"


def test_no_test_module_imports_another() -> None:
    found = {
        (file, name): line
        for path in _test_files()
        for file, name, line in _test_module_imports(path)
    }
    assert found == {}, "shared test helpers belong in tests/helpers.py"


def test_private_state_is_read_only_where_still_listed() -> None:
    found = {
        (file, attr): line
        for path in _test_files()
        for file, attr, line in _private_attributes(path)
    }
    new = sorted(
        f"{file}:{line}: ._{attr[1:]}"
        for (file, attr), line in found.items()
        if (file, attr) not in KNOWN_PRIVATE_STATE
    )
    assert new == [], "tests read private state (use a public accessor or the behaviour)"
    stale = sorted(KNOWN_PRIVATE_STATE - set(found))
    assert stale == [], f"clean now: remove from KNOWN_PRIVATE_STATE: {stale}"


def test_serial_tests_live_where_make_test_collects_them() -> None:
    """`make test`'s second phase collects only the Makefile's ``SERIAL_PATHS``: a test
    marked ``serial`` anywhere else would run in neither phase."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    line = next(x for x in makefile.splitlines() if x.startswith("SERIAL_PATHS ="))
    homes = [ROOT / part for part in line.split("=", 1)[1].split()]
    assert homes and all(home.is_dir() for home in homes), line
    marked = [
        path.relative_to(ROOT).as_posix()
        for path in TESTS.rglob("*.py")
        if path != Path(__file__).resolve() and "mark.serial" in path.read_text(encoding="utf-8")
    ]
    assert marked, "no serial marks found: the check reads the wrong thing"
    outside = [name for name in marked if not any((ROOT / name).is_relative_to(h) for h in homes)]
    assert outside == [], f"serial tests outside SERIAL_PATHS ({line}): {outside}"


def test_the_longest_files_list_names_files_that_exist() -> None:
    """conftest.LONGEST_FILES orders the run (longest first); a renamed file would fall to
    the back of the queue without a word."""
    from tests.conftest import LONGEST_FILES

    missing = [name for name in LONGEST_FILES if not (ROOT / name).is_file()]
    assert missing == [], f"renamed or gone: update LONGEST_FILES: {missing}"
