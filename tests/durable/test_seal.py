"""What the deployment's key binds (agenthost/durable/seal.py), field by field: an
approval, a grant or an audit line moved to another call, run or position, or changed in
any field, no longer verifies; the unchanged one does (the positive control of each)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agenthost.durable import seal
from agenthost.durable.seal import DurableKey, Refused, load_key
from agenthost.errors import AgentHostError

KEY = DurableKey(b"a" * 32, source="<a>")
OTHER = DurableKey(b"b" * 32, source="<b>")

CALL: dict[str, Any] = {
    "run_id": "run-1",
    "call_id": "c1",
    "server": "ledger",
    "tool": "publish",
    "arguments": {"item": "report"},
}


def _answer(key: DurableKey = KEY, **changes: Any) -> dict[str, Any]:
    fields = {**CALL, "verdict": "allow", "who": "alice", **changes}
    return {
        "verdict": fields["verdict"],
        "who": fields["who"],
        "seal": seal.approval(key, **fields),
    }


@pytest.mark.parametrize(
    "moved",
    [
        {"run_id": "run-2"},
        {"call_id": "c2"},
        {"server": "other"},
        {"tool": "record"},
        {"arguments": {"item": "everything"}},
        {"arguments": {"item": "report", "extra": 1}},
    ],
)
def test_an_approval_is_for_one_call_only(moved: dict[str, Any]) -> None:
    answer = _answer()
    assert seal.check_approval(KEY, answer, **CALL)  # the positive control
    assert not seal.check_approval(KEY, answer, **{**CALL, **moved})


@pytest.mark.parametrize(
    "answer",
    [
        {**_answer(), "verdict": "deny"},  # a deny's signature is not an allow's
        {**_answer(), "who": "mallory"},
        {**_answer(), "seal": ""},
        {**_answer(), "seal": None},
        {"verdict": "allow", "who": "alice"},
        _answer(OTHER),  # another deployment's key
        "allow",
        None,
    ],
)
def test_an_approval_changed_in_any_field_does_not_verify(answer: Any) -> None:
    assert not seal.check_approval(KEY, answer, **CALL)


def test_a_grant_binds_the_run_its_first_execution_and_every_input() -> None:
    params = {name: f"value of {name}" for name in seal.GRANTED}
    granted = seal.grant(KEY, "run-1", "first-1", params)
    seal.check_grant(KEY, "run-1", "first-1", granted, {"policy": params["policy"]})
    for run_id, first in (("run-2", "first-1"), ("run-1", "first-2")):
        with pytest.raises(Refused, match="does not verify"):
            seal.check_grant(KEY, run_id, first, granted, {})
    with pytest.raises(Refused, match="its policy is not the one its submitter signed"):
        seal.check_grant(KEY, "run-1", "first-1", granted, {"policy": {"rules": []}})
    # A digest swapped into the grant breaks its MAC.
    forged = {**granted, "fields": {**granted["fields"], "policy": seal.digest({})}}
    with pytest.raises(Refused, match="does not verify"):
        seal.check_grant(KEY, "run-1", "first-1", forged, {"policy": {}})
    with pytest.raises(Refused, match="carries no grant"):
        seal.check_grant(KEY, "run-1", "first-1", None, {})


def test_an_audit_line_binds_its_run_and_seq() -> None:
    line = seal.seal_line(KEY, {"run_id": "run-1", "seq": 3, "type": "decision"})
    assert seal.line_verifies(KEY, line)
    for change in ({"seq": 4}, {"run_id": "run-2"}, {"type": "outcome"}, {"extra": True}):
        assert not seal.line_verifies(KEY, {**line, **change})
    assert not seal.line_verifies(OTHER, line)
    assert seal.verified(KEY, [line, {**line, "seq": 4}]) == [line]


def test_the_key_file_must_be_the_owners_a_regular_file_and_long_enough(
    tmp_path: Path,
) -> None:
    path = tmp_path / "key"
    path.write_bytes(os.urandom(32).hex().encode() + b"\n")
    path.chmod(0o600)
    key = load_key(path)
    assert path.read_text().strip() not in repr(key)
    link = tmp_path / "link"
    link.symlink_to(path)
    with pytest.raises(AgentHostError, match="cannot read the durable key"):
        load_key(link)  # not followed: a link may point anywhere later
    with pytest.raises(AgentHostError, match="not a regular file"):
        load_key(tmp_path)
    path.chmod(0o604)
    with pytest.raises(AgentHostError, match=r"readable by others \(mode 0604\)"):
        load_key(path)
    with pytest.raises(AgentHostError, match="cannot read the durable key"):
        load_key(tmp_path / "missing")
