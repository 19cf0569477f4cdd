"""The packages that re-export their names lazily (agenthost._util.lazy_getattr).

``agenthost``, ``agenthost.auth`` and ``agenthost.transports`` promise that importing them
pulls in no SDK, Authlib, httpx or trio-websocket; a name loads on first use. Checked in a
fresh interpreter, where nothing else has imported those libraries yet.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
import agenthost, agenthost.auth, agenthost.transports

def loaded():
    roots = ("authlib", "keyring", "httpx", "httpx2", "trio_websocket", "anthropic", "openai")
    return sorted({m.split(".")[0] for m in sys.modules} & set(roots))

out = {"on_import": loaded()}
out["cached_before"] = "OAuthSettings" in vars(agenthost.auth)
settings = agenthost.auth.OAuthSettings
out["cached_after"] = vars(agenthost.auth).get("OAuthSettings") is settings
out["same_class"] = settings is sys.modules["agenthost.auth.settings"].OAuthSettings
out["websocket"] = agenthost.transports.open_websocket_transport.__module__
out["after_use"] = loaded()
try:
    agenthost.transports.Nope
except AttributeError as exc:
    out["error"] = str(exc)
print(json.dumps(out))
"""


@pytest.mark.timeout(60)
def test_names_load_on_first_use_and_stay() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["on_import"] == []
    assert out["cached_before"] is False
    assert out["cached_after"] is True
    assert out["same_class"] is True
    assert out["websocket"] == "agenthost.transports.websocket"
    assert "trio_websocket" in out["after_use"]
    assert out["error"] == "module 'agenthost.transports' has no attribute 'Nope'"
