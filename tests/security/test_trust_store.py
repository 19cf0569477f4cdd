"""The trust store under concurrent agenthost processes: no answer is lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agenthost.config.trust import TrustStore

WRITER = """
import sys
from pathlib import Path
from agenthost.config.trust import ProjectFile, TrustStore

store = TrustStore(sys.argv[1])
for i in range(int(sys.argv[3])):
    path = Path(f"/nonexistent/{sys.argv[2]}-{i}/.mcp.json")
    store.record(
        ProjectFile(path=path, root=path.parent, dialect="mcpServers", files={},
                    digest=str(i), summary={}, data={}, imported={}),
        "trust",
    )
"""


def test_concurrent_writers_lose_no_answer(tmp_path: Path) -> None:
    store = tmp_path / "state" / "trusted-projects.json"
    writers, each = 6, 30
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(store), f"w{n}", str(each)])
        for n in range(writers)
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    records = TrustStore(store).records()
    assert len(records) == writers * each
    assert store.stat().st_mode & 0o777 == 0o600
