"""The tests never touch the user's home directory (tests/conftest.py ``_private_home``).

agenthost keeps per-user files (the era cache, "always" answers, chat history, OAuth
tokens) and discovers a per-user config. A test that read the developer's files would pass
or fail by what is on their machine; one that wrote there would leave test servers in the
real era cache. These tests check that every such path, in process and in a CLI process
the test starts, lands in the test's own home, and that the session-wide check in
conftest.py fails a run that writes to the home outside a test.
"""

from __future__ import annotations

import json
import os
import pwd
import sys
from pathlib import Path

import pytest

from agenthost.auth import FileTokenStore
from agenthost.auth.store import data_dir, default_token_store
from agenthost.cli.chat import history_path
from agenthost.config import load_config
from agenthost.config.model import find_config
from agenthost.connection import EraCache
from agenthost_policies.approvals import default_approvals_path
from tests.conftest import CRASHY_SERVER, REPO_ROOT
from tests.helpers import run_cli

pytest_plugins = ["pytester"]


def _test_home() -> Path:
    home = Path(os.environ["HOME"])
    real = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert home.resolve() != real.resolve()
    assert real.resolve() not in home.resolve().parents
    return home


def test_every_per_user_path_is_in_the_tests_own_home(tmp_path: Path) -> None:
    home = _test_home()
    paths = {
        "era cache": EraCache.default().path,
        "approvals": default_approvals_path(),
        "chat history": history_path(),
        "token files": data_dir(),
        "~": Path(os.path.expanduser("~")),
    }
    for what, path in paths.items():
        assert path is not None
        assert path == home or home in path.parents, (what, path)
    assert isinstance(default_token_store(), FileTokenStore)
    # No agenthost.toml of the developer's is found from a folder that has none.
    assert find_config(tmp_path) is None


def test_a_cli_process_writes_its_era_cache_into_the_tests_home(tmp_path: Path) -> None:
    config = tmp_path / "agenthost.toml"
    config.write_text(
        f"[servers.crashy]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(CRASHY_SERVER))}]\n"
        f"cwd = {json.dumps(str(tmp_path))}\n"
    )
    code, _, stderr = run_cli(config, "servers")  # inherits os.environ, as a user's shell
    assert code == 0, stderr
    cache = Path(os.environ["XDG_CACHE_HOME"]) / "agenthost" / "eras.json"
    assert _test_home() in cache.parents
    key = EraCache.key(load_config(config).servers[0])
    assert json.loads(cache.read_bytes())[key]["revision"] == "2025-11-25"


def test_a_write_to_home_outside_a_test_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makeconftest((REPO_ROOT / "tests" / "conftest.py").read_text())
    pytester.makepyfile(
        """
        from pathlib import Path

        import pytest

        @pytest.fixture(scope="session")
        def learnt():
            cache = Path.home() / ".cache" / "agenthost" / "eras.json"
            cache.parent.mkdir(parents=True)
            cache.write_text("{}")

        def test_uses_a_session_fixture(learnt):
            pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    leak = "written to the home directory outside any test's own: ['.cache/agenthost/eras.json']"
    assert leak in result.stdout.str()
