"""Every TOML example in policies/POLICY.md loads: a documented key that the parser refuses
(or a misspelt one it would reject) is a broken promise to the reader."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from agenthost_policies import parse_policy

POLICY_MD = Path(__file__).resolve().parents[2] / "policies" / "POLICY.md"
BLOCKS = re.findall(r"```toml\n(.*?)```", POLICY_MD.read_text(encoding="utf-8"), re.S)


def test_the_document_has_examples() -> None:
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("block", BLOCKS, ids=[f"example{i}" for i in range(len(BLOCKS))])
def test_policy_md_example_loads(block: str, tmp_path: Path) -> None:
    data = tomllib.loads(block)
    assert set(data) == {"policy"}, "each example is a [policy] section or its rules"
    config = parse_policy(data["policy"], source="POLICY.md", base_dir=tmp_path)
    assert config.all_rules or config.audit is not None
