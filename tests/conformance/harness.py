"""Run the official MCP conformance suite against agenthost and read its verdict.

The suite (``@modelcontextprotocol/conformance``, pinned twice in package.json as npm
aliases: ``conformance-0.1`` = 0.1.16, ``conformance-0.2`` = 0.2.0-alpha.12) starts a test
server per scenario, runs ``tests/conformance/client.py <server-url>`` against it and
judges the traffic. This module runs it as a subprocess and reads the verdict from the
``checks.json`` files it writes with ``--output-dir``, not from its coloured log.

A scenario passes when every check it emitted is SUCCESS or INFO (no FAILURE, no
WARNING), at least one check is SUCCESS, and the harness exited 0. "At least one SUCCESS"
matters: a scenario whose checks were all SKIPPED (for instance because the client never
got far enough) proves nothing and must not count as a pass. The suite's own per-scenario
summary line is cross-checked against this reading, so a change in the suite's output
that this parser misreads fails loudly instead of turning into a silent pass.

Run it by hand for the scores (``.venv/bin/python -m tests.conformance.harness``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from tests.forkserver import peer_python

__all__ = [
    "CLIENT",
    "REPO_ROOT",
    "TIMING_CHECKS",
    "VERSIONS",
    "Check",
    "ConformanceError",
    "Verdict",
    "client_command",
    "list_client_scenarios",
    "node_for",
    "run_requirements",
    "run_scenario",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = REPO_ROOT / "node_modules"
CLIENT = Path(__file__).resolve().with_name("client.py")

#: Pinned suite version -> the npm alias it is installed under (package.json).
VERSIONS: Mapping[str, str] = {
    "0.1.16": "conformance-0.1",
    "0.2.0-alpha.12": "conformance-0.2",
}

#: The alpha uses Node 22 APIs; package.json pins ``node@22`` for it.
_MIN_NODE = {"0.1.16": 18, "0.2.0-alpha.12": 22}

_INSTALL_HINT = "run `make test` (it installs the pinned suite with `npm ci`)"
#: ``<scenario>-<ISO timestamp with '-' for ':' and '.'>``, the result directory name.
_RESULT_DIR = re.compile(r"^(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
#: One line of the suite summary of a ``--requirements`` run: ``✓ name: 2 passed, ...``.
_SUMMARY_LINE = re.compile(r"^(?P<mark>[✓✗]) (?P<scenario>\S+): \d+ passed, ")
#: One ``not_scored`` client entry of ``list --requirements``: ``    - name [client]``.
_UNSCORED_LINE = re.compile(r"^\s+- (?P<scenario>\S+) \[client\]$")
#: Checks that time the client against the wall clock (sse-retry: reconnect after the
#: server's ``retry`` ms, from 50 ms early to 200 ms late; twice as late is a FAILURE).
TIMING_CHECKS = frozenset({"client-sse-retry-timing"})
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TAIL = 4000


class ConformanceError(Exception):
    """The suite could not be run, or said something this module cannot read."""


@attrs.frozen(kw_only=True)
class Check:
    """One check the suite emitted (a line of ``checks.json``)."""

    id: str
    status: str
    description: str = ""
    error: str | None = None

    def describe(self) -> str:
        text = f"{self.status} {self.id}: {self.description}"
        return f"{text} -- {self.error}" if self.error else text


@attrs.frozen(kw_only=True)
class Verdict:
    """What the suite said about one scenario."""

    scenario: str
    version: str
    checks: tuple[Check, ...] = attrs.field(repr=False)
    #: The harness's exit status (single-scenario runs); None inside a suite run, where
    #: the suite judges the checks alone.
    exit_code: int | None = None
    #: The end of the harness's output (with the client's stderr on failure), for messages.
    output: str = attrs.field(default="", repr=False)

    def count(self, status: str) -> int:
        return sum(check.status == status for check in self.checks)

    @property
    def failing(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.status in ("FAILURE", "WARNING"))

    @property
    def passed(self) -> bool:
        return (
            not self.failing
            and self.count("SUCCESS") > 0
            and (self.exit_code is None or self.exit_code == 0)
        )

    @property
    def only_late(self) -> bool:
        """Failed only because a timing check found the client late (never early).

        On a loaded machine a late reconnect says more about the scheduler than about
        agenthost; an early one is a real bug.
        """
        return bool(self.failing) and all(
            check.id in TIMING_CHECKS and "late" in (check.error or "") for check in self.failing
        )

    def explain(self) -> str:
        """Why it failed (or that it passed), with every failing check, for an assertion."""
        head = f"conformance {self.version} {self.scenario}: "
        if self.passed:
            return head + f"passed ({self.count('SUCCESS')} checks)"
        reasons = [check.describe() for check in self.failing]
        if not self.checks:
            reasons.append("the suite recorded no checks")
        elif self.count("SUCCESS") == 0 and not self.failing:
            reasons.append(
                f"no check succeeded ({self.count('SKIPPED')} skipped): nothing was verified"
            )
        if self.exit_code not in (None, 0):
            reasons.append(f"the harness exited {self.exit_code}")
        lines = [head + "FAILED", *(f"  - {reason}" for reason in reasons)]
        if self.output:
            lines += ["--- suite output (tail) ---", self.output]
        return "\n".join(lines)


def package_dir(version: str) -> Path:
    return NODE_MODULES / VERSIONS[version]


def installed_version(version: str) -> str:
    manifest = package_dir(version) / "package.json"
    if not manifest.is_file():
        raise ConformanceError(f"conformance {version} is not installed; {_INSTALL_HINT}")
    found = json.loads(manifest.read_text())["version"]
    if not isinstance(found, str):
        raise ConformanceError(f"{manifest}: no version")
    return found


@functools.cache
def node_for(version: str) -> str:
    """The ``node`` that runs this suite version: npm's pinned one, else PATH's if new enough."""
    candidates = [str(NODE_MODULES / ".bin" / "node"), "node"]
    for node in candidates:
        try:
            out = subprocess.run(
                [node, "--version"], capture_output=True, text=True, timeout=120, check=True
            ).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        major = int(out.strip().lstrip("v").split(".")[0])
        if major >= _MIN_NODE[version]:
            return node
    raise ConformanceError(
        f"conformance {version} needs Node >= {_MIN_NODE[version]}; {_INSTALL_HINT}"
        " (package.json pins node@22 under node_modules/.bin)"
    )


def client_command(python: str = sys.executable) -> str:
    """``--command`` for the suite: it splits on spaces and runs the result with a shell.

    With this interpreter, ``client.py`` starts from the suite's fork server
    (tests/forkserver.py: the same client, forked from a warm process instead of started
    cold, ~0.5 s of CPU less per client; ``AGENTHOST_TEST_FORK=0`` turns it off).
    """
    if python == sys.executable:
        python = peer_python()
    return shlex.join([python, str(CLIENT)])


def _suite_argv(version: str) -> list[str]:
    entry = package_dir(version) / "dist" / "index.js"
    if not entry.is_file():
        raise ConformanceError(f"conformance {version} is not installed; {_INSTALL_HINT}")
    return [node_for(version), str(entry)]


def _run(
    argv: Sequence[str], timeout: float, *, cache_home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the suite; ``cache_home`` becomes the clients' ``XDG_CACHE_HOME``.

    Every run gets a cache of its own: agenthost remembers each server's protocol era
    there, keyed by URL, and the suite's test servers reuse ports, so a shared cache
    (``~/.cache``, which every checkout on the machine shares) would start one scenario
    with the era another scenario's server taught, and the suite would judge that.
    """
    env = {**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
    if cache_home is not None:
        env["XDG_CACHE_HOME"] = str(cache_home)
    try:
        return subprocess.run(
            argv,
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        raise ConformanceError(
            f"the suite did not finish within {timeout:.0f} s: {shlex.join(argv)}\n{out[-_TAIL:]}"
        ) from None


def _read_results(output_dir: Path, version: str) -> dict[str, tuple[Check, ...]]:
    """Every ``<scenario>-<timestamp>/checks.json`` under ``output_dir``, by scenario."""
    results: dict[str, tuple[Check, ...]] = {}
    for path in sorted(output_dir.rglob("checks.json")):
        relative = path.parent.relative_to(output_dir).as_posix()
        match = _RESULT_DIR.match(relative)
        if match is None:
            raise ConformanceError(f"unexpected result directory {relative!r} from {version}")
        raw = json.loads(path.read_text())
        if not isinstance(raw, list):
            raise ConformanceError(f"{path}: not a list of checks")
        results[match["scenario"]] = tuple(
            Check(
                id=str(item["id"]),
                status=str(item["status"]),
                description=str(item.get("description", "")),
                error=item.get("errorMessage"),
            )
            for item in raw
        )
    return results


def _plain(text: str) -> str:
    return _ANSI.sub("", text)


def run_scenario(
    version: str,
    scenario: str,
    *,
    spec_version: str | None = None,
    client_timeout: float = 120.0,
    python: str = sys.executable,
) -> Verdict:
    """Run one client scenario against agenthost's conformance client.

    Raises:
        ConformanceError: the suite is missing, timed out, or wrote no result (for
            instance because the scenario does not apply at ``spec_version``).
    """
    argv = [
        *_suite_argv(version),
        "client",
        "--command",
        client_command(python),
        "--scenario",
        scenario,
        "--timeout",
        str(int(client_timeout * 1000)),
    ]
    if spec_version is not None:
        argv += ["--spec-version", spec_version]
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        results_dir, cache_home = Path(tmp) / "results", Path(tmp) / "cache"
        proc = _run(
            [*argv, "--output-dir", str(results_dir)],
            timeout=client_timeout + 60,
            cache_home=cache_home,
        )
        output = _plain(proc.stdout + proc.stderr)
        results = _read_results(results_dir, version)
    if scenario not in results:
        raise ConformanceError(
            f"conformance {version} wrote no result for {scenario!r} (exit {proc.returncode})"
            f"\n{output[-_TAIL:]}"
        )
    verdict = Verdict(
        scenario=scenario,
        version=version,
        checks=results[scenario],
        exit_code=proc.returncode,
        output=output[-_TAIL:],
    )
    # The suite's exit status counts WARNINGs and a crashed client; ours adds "something
    # succeeded". So a pass here is always a pass there.
    if verdict.passed and proc.returncode != 0:
        raise ConformanceError(f"verdict disagrees with the suite's exit status:\n{output}")
    return verdict


def run_requirements(
    version: str,
    revision: str,
    *,
    client_timeout: float = 120.0,
    python: str = sys.executable,
) -> dict[str, Verdict]:
    """Run ``--requirements REVISION``: every scenario the revision requires, at its wire.

    The suite runs them all in parallel and judges each by its checks alone (a client that
    exits non-zero is judged by what it did before). Returns a verdict per scenario run,
    scored or not.

    Raises:
        ConformanceError: the suite is missing or timed out, or its summary disagrees
            with the checks it wrote.
    """
    argv = [
        *_suite_argv(version),
        "client",
        "--command",
        client_command(python),
        "--requirements",
        revision,
        "--timeout",
        str(int(client_timeout * 1000)),
    ]
    with tempfile.TemporaryDirectory(prefix="conformance-") as tmp:
        results_dir, cache_home = Path(tmp) / "results", Path(tmp) / "cache"
        proc = _run(
            [*argv, "--output-dir", str(results_dir)],
            timeout=client_timeout + 120,
            cache_home=cache_home,
        )
        stdout = _plain(proc.stdout)
        results = _read_results(results_dir, version)
    summary = {
        match["scenario"]: match["mark"] == "✓"
        for match in map(_SUMMARY_LINE.match, stdout.splitlines())
        if match is not None
    }
    if set(summary) != set(results):
        raise ConformanceError(
            f"the suite summarised {sorted(summary)} but wrote results for {sorted(results)}"
            f"\n{stdout[-_TAIL:]}"
        )
    verdicts = {
        name: Verdict(scenario=name, version=f"{version} --requirements {revision}", checks=checks)
        for name, checks in results.items()
    }
    for name, verdict in verdicts.items():
        if verdict.passed and not summary[name]:
            raise ConformanceError(f"{name}: passed by its checks, failed in the summary")
    return verdicts


def list_client_scenarios(version: str) -> list[str]:
    """Every client scenario the suite version ships (``conformance list --client``)."""
    proc = _run([*_suite_argv(version), "list", "--client"], timeout=120)
    if proc.returncode != 0:
        raise ConformanceError(f"conformance {version} list failed:\n{proc.stderr[-_TAIL:]}")
    return [
        line.strip()[2:].split(" [")[0]
        for line in _plain(proc.stdout).splitlines()
        if line.strip().startswith("- ")
    ]


def list_requirements(version: str, revision: str) -> tuple[list[str], list[str]]:
    """The client scenarios ``revision`` requires (scored), and those it runs unscored."""
    proc = _run([*_suite_argv(version), "list", "--requirements", revision], timeout=120)
    if proc.returncode != 0:
        raise ConformanceError(f"conformance {version} list failed:\n{proc.stderr[-_TAIL:]}")
    lines = _plain(proc.stdout).splitlines()
    start = lines.index("Client scenarios (test against a client):")
    scored = []
    for line in lines[start + 1 :]:
        if not line.strip().startswith("- "):
            break
        scored.append(line.strip()[2:])
    not_scored = [
        match["scenario"] for match in map(_UNSCORED_LINE.match, lines[start:]) if match is not None
    ]
    return scored, not_scored


def _score(verdicts: Iterable[Verdict]) -> str:
    verdicts = list(verdicts)
    return f"{sum(v.passed for v in verdicts)}/{len(verdicts)}"


def main() -> int:
    """Print the scores (used for tests/conformance/README.md)."""
    for version in VERSIONS:
        names = list_client_scenarios(version)
        verdicts = [run_scenario(version, name) for name in names]
        plain = [v for v in verdicts if not v.scenario.startswith("auth/")]
        auth = [v for v in verdicts if v.scenario.startswith("auth/")]
        print(
            f"{version}: all client scenarios {_score(verdicts)}"
            f" (non-auth {_score(plain)}, auth {_score(auth)})"
        )
        for verdict in verdicts:
            print(f"  {'pass' if verdict.passed else 'FAIL'} {verdict.scenario}")
    revision = "2026-07-28"
    required, _ = list_requirements("0.2.0-alpha.12", revision)
    results = run_requirements("0.2.0-alpha.12", revision)
    scored = [results[name] for name in required if not name.startswith("auth/")]
    print(f"0.2.0-alpha.12 --requirements {revision}: non-auth {_score(scored)}")
    for verdict in [results[name] for name in required]:
        print(f"  {'pass' if verdict.passed else 'FAIL'} {verdict.scenario}")
    everything = [results[name] for name in required]
    print(f"  (all required client scenarios, auth included: {_score(everything)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
