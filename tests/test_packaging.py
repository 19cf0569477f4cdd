"""The wheel, built and installed as a user gets it (issue 27, section 3).

The repository keeps ``providers/`` and ``policies/`` at its top, but a wheel that
installed them under those names would put two generic top-level packages into a user's
environment, where any other distribution may own (or later install) the same names. The
wheel installs them as ``agenthost_providers`` and ``agenthost_policies``; these tests
build the real wheel, list what it installs, and run the installed command, offline, in a
fresh virtual environment that sees neither this checkout nor its editable install.

The build is ``python -m build``'s default, an sdist and then the wheel from the unpacked
sdist, as a release is built; it runs once per module (about ten seconds): the tests share
one module-scoped build, and ``make test`` (``--dist loadfile``) keeps them on one worker.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

REPO = Path(__file__).resolve().parent.parent
INSTALLED_PACKAGES = {"agenthost", "agenthost_providers", "agenthost_policies"}
DEMO_TASK = "Tidy up my notes: list them, summarize the meeting note, and delete the scratch note."

pytestmark = [pytest.mark.timeout(240)]


@attrs.frozen
class Installed:
    sdist: Path
    wheel: Path
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """A command of the fresh environment, as a user's shell would run it."""
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        for name in ("OPENAI_BASE_URL", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
            env.pop(name, None)
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["AGENTHOST_PYTHON"] = str(self.python)
        return subprocess.run(
            args, capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
        )


def _python(*args: str, home: Path) -> None:
    """A module of this Python (pip, build), writing nothing outside ``home`` (pip's user
    agent runs ``rustc --version``, and rustup's proxy writes ``~/.rustup/settings.toml``)."""
    subprocess.run(
        [sys.executable, *args],
        check=True,
        capture_output=True,
        timeout=180,
        env={**os.environ, "HOME": str(home), "PIP_NO_CACHE_DIR": "1"},
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The wheel of this checkout, installed with ``pip install`` into a fresh venv.

    The venv borrows the dependencies already installed here through a ``.pth`` line
    naming this environment's site-packages (so the test needs no package index): a path
    line in a ``.pth`` file adds the folder but does not run the ``.pth`` files inside
    it, so the editable install's own path entries (this checkout) stay out.
    """
    root = tmp_path_factory.mktemp("wheel")
    home = root / "home"
    home.mkdir()
    _python("-m", "build", "--outdir", str(root / "dist"), str(REPO), home=home)
    (sdist,) = (root / "dist").glob("agenthost-*.tar.gz")
    (wheel,) = (root / "dist").glob("agenthost-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    result = Installed(sdist=sdist, wheel=wheel, venv=venv)
    pip = ("-m", "pip", "--disable-pip-version-check", "-q", "--python", str(result.python))
    _python(*pip, "install", "--no-deps", str(wheel), home=home)
    site = subprocess.run(
        [str(result.python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "zz_borrowed_dependencies.pth").write_text(sysconfig.get_path("purelib"))
    yield result
    shutil.rmtree(root, ignore_errors=True)


def test_the_wheel_installs_only_collision_safe_top_level_names(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        top = {name.split("/")[0] for name in wheel.namelist()}
    packages = {name for name in top if not name.endswith(".dist-info")}
    assert packages == INSTALLED_PACKAGES
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
    # The data files travel with the renamed packages (read with importlib.resources).
    assert "agenthost_policies/presets/interactive.toml" in names
    assert "agenthost_providers/catalog.toml" in names


def test_the_sdist_has_the_folders_once(installed: Installed) -> None:
    """The sdist keeps the repository's layout, without the editable install's symlinks."""
    with tarfile.open(installed.sdist) as sdist:
        paths = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert "providers/catalog.toml" in paths
    assert "policies/presets/interactive.toml" in paths
    assert not [p for p in paths if p.startswith(".dev-names")]


def test_the_installed_environment_has_no_providers_or_policies(
    installed: Installed, tmp_path: Path
) -> None:
    probe = (
        "import importlib.util as u, sys\n"
        "for name in sys.argv[1:]:\n"
        "    spec = u.find_spec(name)\n"
        "    print(name, spec.origin if spec else None)\n"
    )
    names = ["providers", "policies", *sorted(INSTALLED_PACKAGES)]
    proc = installed.run(str(installed.python), "-c", probe, *names, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert found["providers"] == "None"
    assert found["policies"] == "None"
    for name in INSTALLED_PACKAGES:
        # Imported from the fresh venv's own site-packages, never from this checkout.
        assert str(installed.venv) in found[name], found
        assert str(REPO) not in found[name], found


def test_the_installed_command_runs_the_offline_demo(installed: Installed, tmp_path: Path) -> None:
    version = installed.run("agenthost", "--version", cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert "2025-11-25" in version.stdout
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=_no_state)
    config = str(tmp_path / "examples" / "agenthost.toml")
    demo = installed.run("agenthost", "--config", config, "run", DEMO_TASK, cwd=tmp_path)
    out = demo.stdout + demo.stderr
    assert demo.returncode == 0, out
    for expect in (
        "[tool] notes__list_notes",
        "~ sampling for notes: chose demo/scripted-replay",
        "x denied: destructive note tools are disabled",
        "stopped: end_turn",
    ):
        assert expect in out, out
    assert "Traceback" not in out


def _no_state(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if n.startswith("audit") or n == "__pycache__"}


def test_the_sdist_leaves_out_the_demo_audit_log(tmp_path: Path) -> None:
    """The demo policy (examples/policy.toml) appends every decision, with its tool
    arguments, to examples/audit.jsonl; examples/.gitignore keeps it out of git, but the
    sdist is built from the working tree and hatchling reads only the root .gitignore. A
    release built after trying the demo must not ship that log. The build runs on a copy
    of the tracked files, so the log is never written into this checkout."""
    source = tmp_path / "source"
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        path = REPO / name
        if path.is_file() and not path.is_symlink():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, source / name)
    (source / "examples" / "audit.jsonl").write_text('{"tool": "notes__read_note"}\n')
    home = tmp_path / "home"
    home.mkdir()
    _python("-m", "build", "--sdist", "--outdir", str(tmp_path / "dist"), str(source), home=home)
    (sdist,) = (tmp_path / "dist").glob("agenthost-*.tar.gz")
    with tarfile.open(sdist) as archive:
        paths = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert "examples/policy.toml" in paths
    assert [p for p in paths if p.endswith(".jsonl") and "audit" in p] == []
