"""Issue 28, Low: ``--json`` output escapes what a terminal would obey (C1 controls, DEL,
bidi marks) as ``\\u`` escapes, so the output stays the same JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.hostile.conftest import HOSTILE_SERVER

#: C1 controls (CSI, NEL), DEL and every bidi control, U+061C (Arabic letter mark) too.
RAW_CONTROLS = "\x9b2J\x85\x7f\u202e\u2066\u2069\u200f\u061c\u2028"


def test_json_output_escapes_c1_and_bidi_characters(tmp_path: Path) -> None:
    """Low: `--json` wrote C1 and bidi characters raw (a CSI in a tool's text reached the
    terminal; U+061C, a bidi mark, still did); now each is a \\u escape, and the output
    is the same JSON."""
    path = tmp_path / "agenthost.toml"
    path.write_text(
        f"[servers.h]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(HOSTILE_SERVER))}]\n\n"
        '[policy]\nmode = "headless"\n\n[[policy.rules]]\nkind = "tool"\ndecision = "allow"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    message = json.dumps({"message": f"hi{RAW_CONTROLS}there"})
    argv = ["--config", str(path), "--json", "call", "h__echo", message]
    out = subprocess.run(
        [sys.executable, "-m", "agenthost", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert not any(c in out.stdout for c in RAW_CONTROLS if c not in "2J"), repr(out.stdout)
    assert json.loads(out.stdout)["content"][0]["text"] == f"hi{RAW_CONTROLS}there"
