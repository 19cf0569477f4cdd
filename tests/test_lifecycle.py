"""The pure era verdicts and the 2026-07-28 stamp, on plain dicts (no I/O, no trio)."""

from __future__ import annotations

import pytest

from agenthost.protocol import lifecycle as lc


def test_probe_refusal_modern_codes_are_raised() -> None:
    for code in (-32020, -32021, -32022):
        assert lc.probe_refusal(code, None) is None


def test_probe_refusal_auth_is_raised_never_era_evidence() -> None:
    assert lc.probe_refusal(-32600, {"httpStatus": 401}) is None
    assert lc.probe_refusal(-32600, {"httpStatus": 403}) is None


def test_probe_refusal_other_errors_fall_back_whatever_the_code() -> None:
    assert lc.probe_refusal(-32601, None) == "server/discover refused (-32601)"
    assert lc.probe_refusal(-32600, {"httpStatus": 400}) == "server/discover refused (-32600)"
    assert lc.probe_refusal(-1, "not a mapping") == "server/discover refused (-1)"


def test_discover_revision_is_the_newest_common_modern_one() -> None:
    assert lc.discover_revision(["2025-11-25", "2026-07-28"]) == "2026-07-28"
    assert lc.discover_revision(["2025-11-25"]) is None
    assert lc.discover_revision([]) is None


def test_retry_revision_reads_data_supported() -> None:
    assert lc.retry_revision({"supported": ["2026-07-28"]}) == "2026-07-28"
    assert lc.retry_revision({"supported": ["2099-01-01"]}) is None
    assert lc.retry_revision({"supported": "2026-07-28"}) is None
    assert lc.retry_revision(None) is None


def test_supported_revisions() -> None:
    assert lc.supported_revisions({"supported": ["a", 1]}) == ("a", "1")
    assert lc.supported_revisions({}) == ()
    assert lc.supported_revisions([]) == ()


def test_modern_evidence_written_once() -> None:
    assert lc.modern_evidence(-32022)
    assert lc.modern_evidence(None, ("2026-07-28",))
    assert not lc.modern_evidence(-32601)
    assert not lc.modern_evidence(None, ("2025-06-18",))


def test_falls_back_only_for_a_dual_era_server() -> None:
    assert lc.falls_back(("2099-01-01", "2025-06-18"))
    assert not lc.falls_back(("2099-01-01",))


def test_server_info_from_result_meta() -> None:
    info = {"name": "s", "version": "1"}
    assert lc.server_info({"_meta": {lc.META_SERVER_INFO: info}}) == info
    assert lc.server_info({"_meta": {lc.META_SERVER_INFO: {"name": 3}}}) is None
    assert lc.server_info({}) is None


def _stamp(level: str | None = None) -> lc.Stamp:
    return lc.Stamp("2026-07-28", {"sampling": {}}, {"name": "agenthost"}, level)


def test_stamp_merges_meta_and_keeps_callers_keys() -> None:
    params, headers = _stamp().stamp("tools/call", {"name": "t", "_meta": {"progressToken": 1}})
    meta = params["_meta"]
    assert meta["progressToken"] == 1
    assert meta[lc.META_PROTOCOL_VERSION] == "2026-07-28"
    assert meta[lc.META_CLIENT_CAPABILITIES] == {"sampling": {}}
    assert meta[lc.META_CLIENT_INFO] == {"name": "agenthost"}
    assert lc.META_LOG_LEVEL not in meta
    assert headers == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "t",
    }


def test_stamp_level_and_extensions_are_per_stamp_and_per_request() -> None:
    base = _stamp()
    leveled = base.with_level("debug")
    assert leveled.params(None)["_meta"][lc.META_LOG_LEVEL] == "debug"
    assert lc.META_LOG_LEVEL not in base.params(None)["_meta"]
    ext = base.params({}, {"io.x/tasks": {}})["_meta"][lc.META_CLIENT_CAPABILITIES]
    assert ext == {"sampling": {}, "extensions": {"io.x/tasks": {}}}
    assert base.capabilities == {"sampling": {}}  # the session's own are untouched


def test_stamp_headers_tasks_route_by_task_and_tools_mirror_params() -> None:
    stamp = _stamp()
    assert stamp.headers("tasks/get", {"taskId": "42"})["Mcp-Name"] == "42"
    mirrors = {"t": ((("region",), "Region"),)}
    headers = stamp.headers("tools/call", {"name": "t", "arguments": {"region": "eu"}}, mirrors)
    assert headers["Mcp-Param-Region"] == "eu"
    assert "Mcp-Name" not in stamp.headers("tools/list", {})


# --- reaching a server: the plan table --------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "transport", "cached", "expected"),
    [
        ("legacy", "stdio", None, lc.Plan("legacy", "config: protocol = legacy")),
        ("2026-07-28", "http", None, lc.Plan("modern", "config: protocol = 2026-07-28")),
        ("auto", "sse", None, lc.Plan("legacy", "sse transport (no 2026-07-28 binding)")),
        (
            "auto",
            "websocket",
            (True, None),
            lc.Plan("legacy", "websocket transport (no 2026-07-28 binding)"),
        ),
        ("auto", "stdio", None, lc.Plan("auto")),
        ("auto", "stdio", (True, None), lc.Plan("modern", "cached")),
        ("auto", "http", (False, "fell back"), lc.Plan("legacy", "cached (fell back)")),
    ],
)
def test_first_plan(
    mode: str, transport: str, cached: tuple[bool, str | None] | None, expected: lc.Plan
) -> None:
    assert lc.first_plan(mode, transport, cached) == expected


_PROBE = lc.Plan("auto")
_CACHED = lc.Plan("modern", "cached")
_LEGACY = lc.Plan("legacy", "probe: x; initialize")


@pytest.mark.parametrize(
    ("mode", "plan", "outcome", "stdio", "expected_era"),
    [
        ("auto", _PROBE, lc.NOT_MODERN, False, "legacy"),
        ("auto", _PROBE, lc.EXITED, True, "legacy"),
        ("auto", _PROBE, lc.EXITED, False, None),  # HTTP: no process to restart
        ("auto", _PROBE, lc.REFUSED, True, None),
        ("auto", _CACHED, lc.REFUSED, True, "auto"),
        ("auto", _CACHED, lc.REFUSED_MODERN, False, "auto"),
        ("auto", _CACHED, lc.EXITED, True, "auto"),  # exited on the cached era's first message
        ("auto", _LEGACY, lc.REFUSED_MODERN, True, "modern"),
        ("auto", _LEGACY, lc.REFUSED, True, None),
        ("legacy", lc.Plan("legacy", "config: protocol = legacy"), lc.REFUSED_MODERN, True, None),
        ("2026-07-28", lc.Plan("modern", "config"), lc.NOT_MODERN, True, None),
    ],
)
def test_next_plan(
    mode: str, plan: lc.Plan, outcome: str, stdio: bool, expected_era: str | None
) -> None:
    following = lc.next_plan(mode, plan, outcome, stdio=stdio, reason="why")
    assert (following.era if following is not None else None) == expected_era


def test_next_plan_names_the_probe_s_reason() -> None:
    following = lc.next_plan("auto", _PROBE, lc.NOT_MODERN, stdio=True, reason="no discover")
    assert following == lc.Plan("legacy", "probe: no discover; initialize")
    assert not following.cached and _CACHED.cached
