"""Namespaced tool names: provider-safe, deterministic, collision-free."""

from __future__ import annotations

import re

import pytest
import trio
import trio.testing

from agenthost.host.catalog import Catalog, namespaced_names
from agenthost.protocol.types import Tool

RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool(name: str) -> Tool:
    return Tool(name=name, input_schema={"type": "object"})


@pytest.mark.parametrize(
    ("server", "name", "expected"),
    [
        ("github", "create_issue", "github__create_issue"),
        ("fs", "read-file", "fs__read-file"),
    ],
)
def test_plain_names_are_kept(server: str, name: str, expected: str) -> None:
    assert namespaced_names([(server, name)]) == {(server, name): expected}


@pytest.mark.parametrize(
    "name",
    ["files.read", "weird name with spaces", "x" * 80, "ünïcode", "a/b:c"],
)
def test_unfit_names_are_hashed_and_valid(name: str) -> None:
    result = namespaced_names([("srv", name)])[("srv", name)]
    assert RULE.match(result)
    assert result.startswith("srv__")
    assert re.search(r"_[0-9a-f]{8}$", result)
    # deterministic: the same pair always gives the same name
    assert namespaced_names([("other", "t"), ("srv", name)])[("srv", name)] == result


def test_collisions_take_the_hashed_form_on_both_sides() -> None:
    pairs = [("a__b", "c"), ("a", "b__c"), ("z", "ok")]
    names = namespaced_names(pairs)
    assert names[("z", "ok")] == "z__ok"
    assert names[("a__b", "c")] != names[("a", "b__c")]
    assert all(RULE.match(n) for n in names.values())
    assert names == namespaced_names(list(reversed(pairs)))


def test_sanitised_duplicates_stay_distinct() -> None:
    names = namespaced_names([("s", "a.b"), ("s", "a b"), ("s", "a_b")])
    assert len(set(names.values())) == 3
    assert names[("s", "a_b")] == "s__a_b"


def test_catalog_routes_and_reindexes() -> None:
    catalog = Catalog()
    catalog.update_tools("one", [tool("echo"), tool("x.y")])
    catalog.update_tools("two", [tool("echo")])
    names = [t.name for t in catalog.tools()]
    assert names[0] == "one__echo"
    assert re.fullmatch(r"one__x_y_[0-9a-f]{8}", names[1])
    assert names[2] == "two__echo"
    entry = catalog.tool("two__echo")
    assert entry is not None
    assert (entry.server, entry.original_name) == ("two", "echo")
    catalog.remove("two")
    assert catalog.tool("two__echo") is None
    assert catalog.tool("one__echo") is not None


async def test_wait_for_wakes_on_a_change_not_on_a_timer() -> None:
    catalog = Catalog()
    seen: list[str] = []

    async def waiter() -> None:
        await catalog.wait_for(lambda c: c.tool("s__b") is not None)
        seen.append("b")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        catalog.update_tools("s", [tool("a")])  # a change, but not the awaited one
        await trio.testing.wait_all_tasks_blocked()
        assert seen == []
        catalog.update_tools("s", [tool("a"), tool("b")])
    assert seen == ["b"]
    with trio.fail_after(1):  # already true: returns at once
        await catalog.wait_for(lambda c: c.tool("s__a") is not None)
