"""Smoke test of the benchmark: ``python -m bench --quick`` runs every section end to end.

It checks that the benchmark works (every worker, the CLI, the SDK script, the table),
never how fast anything is: timings are not asserted here, by design.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench.report import row_names

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(600)


def test_quick_benchmark_prints_every_row(tmp_path: Path) -> None:
    output = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--fanout", "1,2", "--output", str(output)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("Figure"))
    assert lines[header].split() == [
        "Figure",
        "agenthost",
        "compared",
        "with",
        "ratio",
        "target",
        "result",
    ]
    table = lines[header + 2 :]
    names = row_names([1, 2], large=[0.0625, 0.25], soak=2000)
    for name in names:
        row = next((line for line in table if line.startswith(name + " ")), None)
        assert row is not None, f"row {name!r} missing from:\n{proc.stdout}"
        assert row.split()[-1] in {"PASS", "MISS", "-"}, row
    markdown = output.read_text(encoding="utf-8")
    assert markdown.startswith("# agenthost benchmark")
    for name in names:
        assert f"| {name} |" in markdown


def test_bad_arguments_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--fanout", "0,x"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--fanout" in proc.stderr


@pytest.mark.parametrize("client", ["agenthost", "floor", "ts"])
def test_a_reply_for_another_caller_fails_the_run(client: str) -> None:
    """The server answers each echo with the previous call's message: the run must fail,
    not count it as a fast call."""
    from bench.runner import WorkerFailed, run_worker

    spec = {
        "task": "throughput",
        "client": client,
        "server_args": ["--stale-echo"],
        "seq": 5,
        "conc": 0,
        "inflight": 1,
        "warmup": 0,
        "deadline": 60,
    }
    with pytest.raises(WorkerFailed, match=r"echo of .?m2.? returned .?m1"):
        run_worker(spec)


def test_a_baseline_worker_runs_the_baseline_tree(tmp_path: Path) -> None:
    """``--baseline DIR``: the worker imports DIR's agenthost (a copy here, so its path
    differs from this tree's), and a worker that imported another one fails the run."""
    import shutil

    from bench.baseline import checkout
    from bench.runner import run_worker

    tree = tmp_path / "old"
    shutil.copytree(REPO / "agenthost", tree / "agenthost")
    spec = {"task": "throughput", "client": "agenthost", "seq": 3, "conc": 0}
    spec |= {"inflight": 1, "warmup": 0, "deadline": 60}
    with checkout(str(tree)) as baseline:
        result = run_worker(spec, baseline)
        assert (
            Path(result["agenthost_file"]).resolve()
            == (tree / "agenthost" / "__init__.py").resolve()
        )
        assert result["seq_calls_s"] > 0
        ours = run_worker(spec)
        assert Path(ours["agenthost_file"]).resolve() == REPO / "agenthost" / "__init__.py"
        assert "not the tree at" in (baseline.check(ours) or "")


def test_a_baseline_adds_a_column_only_when_given() -> None:
    from bench.report import Row, render_markdown, render_text

    plain = [Row(name="a", ours="1/s")]
    assert "vs baseline" not in render_text(plain)
    rows = [*plain, Row(name="b", ours="2/s", baseline="1.10x")]
    text, markdown = render_text(rows), render_markdown(rows)
    assert text.splitlines()[0].split()[-2:] == ["vs", "baseline"]
    assert text.splitlines()[-1].split()[-1] == "1.10x"
    assert markdown.splitlines()[1] == "|" + "---|" * 7
    assert markdown.splitlines()[-1].endswith("| 1.10x |")


def test_a_baseline_that_names_nothing_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--only", "stdio", "--baseline", "no-such-rev-xyz"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "neither a directory nor a revision" in proc.stderr
