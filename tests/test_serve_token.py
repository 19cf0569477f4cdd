"""``serve --http`` authenticates local clients: the token file (made once, 0600, reused),
what the CLI prints, and the explicit ``--no-auth``.

Another OS user against the gateway is tests/security/test_serve_local_users.py; here the
owner's side, which runs as any user.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import threading
from pathlib import Path

import httpx
import pytest

from agenthost.errors import ConfigError
from agenthost.serve.local_token import load_or_create, token_path
from tests.helpers import ACCEPT, AGENTHOST, initialize_request, serving_http

pytestmark = pytest.mark.timeout(120)

INIT = initialize_request()


def _env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY") and k != "AGENTHOST_SERVE_TOKEN"
    }


def test_the_token_is_made_once_0600_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "state" / "agenthost" / "serve-token"
    token = load_or_create(path)
    assert len(token) >= 43
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load_or_create(path) == token
    assert [p.name for p in path.parent.iterdir()] == ["serve-token"]  # no temporary left


def test_concurrent_starts_agree_on_one_token(tmp_path: Path) -> None:
    """Found by attacking the first version (its temporary file was named by pid: two
    starts in one process collided and one failed)."""
    path = tmp_path / "serve-token"
    got: list[str] = []
    together = threading.Barrier(8)

    def start() -> None:
        together.wait()
        got.append(load_or_create(path))

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and len(set(got)) == 1


@pytest.mark.parametrize(
    "case", ["readable by others", "symlink", "not a token", "31 characters", "folder"]
)
def test_a_token_file_that_is_not_the_users_alone_is_refused(tmp_path: Path, case: str) -> None:
    path = tmp_path / "serve-token"
    if case == "readable by others":
        path.write_text("a" * 43)
        path.chmod(0o644)
    elif case == "symlink":
        (tmp_path / "elsewhere").write_text("a" * 43)
        path.symlink_to(tmp_path / "elsewhere")
    elif case == "not a token":
        path.write_text("short\n")
        path.chmod(0o600)
    elif case == "31 characters":
        path.write_text("a" * 31 + "\n")
        path.chmod(0o600)
    else:
        path.mkdir()
    with pytest.raises(ConfigError) as caught:
        load_or_create(path)
    assert str(path) in str(caught.value) and "delete it" in str(caught.value)


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "agenthost.toml"
    config.write_text("[servers]\n")
    return config


def test_loopback_needs_the_token_which_survives_a_restart(tmp_path: Path) -> None:
    config = _config(tmp_path)
    with serving_http(config, env=_env()) as served:
        hint = served.next_line()
        path = token_path()
        assert f"<the token in {path}>" in hint and f"$(cat {path})" in hint
        token = path.read_text().strip()
        assert token not in hint
        assert httpx.post(served.url, json=INIT, headers=ACCEPT).status_code == 401
        wrong = {**ACCEPT, "authorization": "Bearer " + "x" * len(token)}
        assert httpx.post(served.url, json=INIT, headers=wrong).status_code == 401
        good = {**ACCEPT, "authorization": f"Bearer {token}"}
        assert httpx.post(served.url, json=INIT, headers=good).status_code == 200
    # A client configured once keeps working: the next start reads the same token.
    with serving_http(config, env=_env()) as again:
        assert httpx.post(again.url, json=INIT, headers=good).status_code == 200


def test_no_auth_is_explicit_and_loud(tmp_path: Path) -> None:
    with serving_http(_config(tmp_path), "--no-auth", env=_env()) as served:
        assert served.next_line().startswith("warning: serving without authentication")
        assert httpx.post(served.url, json=INIT, headers=ACCEPT).status_code == 200
    assert not token_path().exists()  # nothing made for a gateway that asks for none


@pytest.mark.parametrize(
    ("args", "extra", "says"),
    [
        (["--http", "0.0.0.0:0", "--no-auth"], {}, "--no-auth is for loopback only"),
        (["--no-auth"], {}, "--no-auth goes with --http"),
        (["--http", "127.0.0.1:0", "--no-auth"], {"AGENTHOST_SERVE_TOKEN": "t" * 40}, "choose"),
        (["--http", "0.0.0.0:0"], {}, "AGENTHOST_SERVE_TOKEN"),
        # A guessable token: refused with how to make one (never echoed).
        (["--http", "127.0.0.1:0"], {"AGENTHOST_SERVE_TOKEN": "hunter2hunter2"}, "token_urlsafe"),
        (["--http", "0.0.0.0:0"], {"AGENTHOST_SERVE_TOKEN": "x" * 31}, "at least 32"),
        (["--http", "127.0.0.1:0"], {"AGENTHOST_SERVE_TOKEN": "x" * 31 + " y"}, "no spaces"),
    ],
)
def test_contradictions_are_one_line_errors(
    tmp_path: Path, args: list[str], extra: dict[str, str], says: str
) -> None:
    proc = subprocess.run(
        [*AGENTHOST, "--config", str(_config(tmp_path)), "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**_env(), **extra},
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "hunter2" not in proc.stderr and "x" * 31 not in proc.stderr


def test_a_token_of_32_characters_is_taken(tmp_path: Path) -> None:
    """Positive control of the length bound: 32 characters serve."""
    token = "k" * 32
    env = {**_env(), "AGENTHOST_SERVE_TOKEN": token}
    with serving_http(_config(tmp_path), env=env) as served:
        good = {**ACCEPT, "authorization": f"Bearer {token}"}
        assert httpx.post(served.url, json=INIT, headers=good).status_code == 200


def test_two_authorization_headers_are_refused(tmp_path: Path) -> None:
    """The app read the headers into a dict (the last one won): a request with two
    ``Authorization`` headers is ambiguous whichever one a proxy in front checked, and is
    refused, the good token twice included. Positive control: one good header is taken."""
    with serving_http(_config(tmp_path), env=_env()) as served:
        served.next_line()
        bearer = f"Bearer {token_path().read_text().strip()}"
        one = [*ACCEPT.items(), ("authorization", bearer)]
        assert httpx.post(served.url, json=INIT, headers=one).status_code == 200
        for first in ("Bearer wrong", bearer):
            two = [*ACCEPT.items(), ("authorization", first), ("authorization", bearer)]
            answer = httpx.post(served.url, json=INIT, headers=two)
            assert answer.status_code == 400, answer.text
            assert "Authorization" in answer.text
        # The other headers the app decides on, repeated with the same (good) value (httpx
        # itself will not send two Host headers).
        origin = "http://" + served.url.split("/")[2]
        opened = httpx.post(served.url, json=INIT, headers=one).headers["mcp-session-id"]
        for name, value in [("mcp-session-id", opened), ("origin", origin)]:
            two = [*one, (name, value), (name, value)]
            answer = httpx.post(served.url, json=INIT, headers=two)
            assert answer.status_code == 400, (name, answer.text)


def test_a_token_file_others_may_read_stops_serve_with_one_line(tmp_path: Path) -> None:
    path = token_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps("x") * 20)
    path.chmod(0o644)
    proc = subprocess.run(
        [*AGENTHOST, "--config", str(_config(tmp_path)), "serve", "--http", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2, proc.stderr
    assert str(path) in proc.stderr and "other users" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    """Found by attacking the first version: a state folder another user may write (a
    shared XDG_STATE_HOME) lets them swap the token file in; it is refused too."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(ConfigError, match="other users may write"):
        load_or_create(folder / "serve-token")
    folder.chmod(0o700)
    assert load_or_create(folder / "serve-token")  # positive control


def test_the_hint_quotes_a_path_with_spaces(tmp_path: Path) -> None:
    """Found by attacking the first version: the printed ``$(cat PATH)`` split a path
    holding a space into two words."""
    state = tmp_path / "my state"
    env = {**_env(), "XDG_STATE_HOME": str(state)}
    with serving_http(_config(tmp_path), env=env) as served:
        hint = served.next_line()
    path = state / "agenthost" / "serve-token"
    assert f"$(cat {shlex.quote(str(path))})" in hint, hint
    command = hint.split("e.g. ", 1)[1]
    words = shlex.split(command.replace(f"$(cat {shlex.quote(str(path))})", "TOKEN"))
    assert words[-2:] == ["--header", "Authorization: Bearer TOKEN"], words


def test_get_and_delete_need_the_token_too(tmp_path: Path) -> None:
    """Another client cannot open the owner's session's stream nor end it by its id."""
    with serving_http(_config(tmp_path), env=_env()) as served:
        served.next_line()
        good = {**ACCEPT, "authorization": f"Bearer {token_path().read_text().strip()}"}
        opened = httpx.post(served.url, json=INIT, headers=good)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        assert httpx.get(served.url, headers={**ACCEPT, **session}).status_code == 401
        assert httpx.delete(served.url, headers={**ACCEPT, **session}).status_code == 401
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        still = httpx.post(served.url, json=ping, headers={**good, **session})
        assert still.status_code == 200  # the owner's session is still there
