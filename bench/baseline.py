"""Another version of agenthost, measured in the same interleaved run (``--baseline REF``).

Why in one run: two separate benchmark runs on a shared machine differ by more than most
changes do, so "did this commit make the calls faster?" is only answered by running both
versions round by round, as :func:`bench.runner.interleave` does for the clients. The
baseline's workers run this tree's measuring code (``bench/``) against the baseline's
``agenthost`` (and its ``providers``/``policies``): a directory of symlinks puts those
first on the worker's ``sys.path``, and the worker reports which ``agenthost`` it imported,
so a mix-up fails the run instead of comparing a version with itself.

``REF`` is a git revision (checked out with ``git worktree add --detach`` into a
temporary directory, removed afterwards) or an existing directory holding a tree.
"""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import attrs

from bench.measure import BENCH_DIR

__all__ = ["BASE_SUFFIX", "Baseline", "base_variant", "checkout", "is_base", "plain"]

REPO: Final = BENCH_DIR.parent
#: A variant name ending with this runs its client from the baseline tree.
BASE_SUFFIX: Final = "@base"
#: The baseline tree's packages the workers import from it (the rest comes from here).
_PACKAGES: Final = ("agenthost", "providers", "policies")


def base_variant(client: str) -> str:
    return client + BASE_SUFFIX


def is_base(variant: str) -> bool:
    return variant.endswith(BASE_SUFFIX)


def plain(variant: str) -> str:
    """The client a variant runs (``agenthost@base`` -> ``agenthost``)."""
    return variant.removesuffix(BASE_SUFFIX)


@attrs.frozen(kw_only=True)
class Baseline:
    """A checked-out baseline and the directory its workers start in."""

    #: What the user named (a revision or a path), for the table's note.
    label: str
    #: The baseline tree (its ``agenthost/`` is what the workers import).
    root: Path
    #: Symlinks: the baseline's packages and this tree's ``bench``; the workers' cwd.
    overlay: Path

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` with the overlay first on ``PYTHONPATH`` (the cwd is first anyway)."""
        env = dict(base)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(self.overlay), str(REPO), base.get("PYTHONPATH")])
        )
        return env

    def check(self, result: dict[str, Any]) -> str | None:
        """Why ``result`` did not come from the baseline's agenthost, or None if it did."""
        loaded = result.get("agenthost_file")
        if not loaded:
            return "the worker did not report which agenthost it imported"
        if not Path(loaded).resolve().is_relative_to(self.root.resolve()):
            return f"the baseline worker imported {loaded}, not the tree at {self.root}"
        return None


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip()


@contextmanager
def checkout(ref: str) -> Iterator[Baseline]:
    """The baseline named ``ref`` (a directory, else a git revision), ready to run.

    Resource handling: a worktree made here is removed (``git worktree remove --force``)
    and the temporary directory deleted on exit, whatever happened.

    Raises:
        ValueError: ``ref`` is neither a directory with ``agenthost/`` nor a revision.
    """
    with tempfile.TemporaryDirectory(prefix="agenthost-baseline-") as tmp:
        given = Path(ref).expanduser()
        made = False
        if given.is_dir():
            root, label = given.resolve(), str(given)
        else:
            try:
                commit = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
            except subprocess.CalledProcessError:
                wrong = f"--baseline {ref!r} is neither a directory nor a revision"
                raise ValueError(wrong) from None
            root = Path(tmp, "tree")
            _git("worktree", "add", "--detach", "--quiet", str(root), commit)
            made, label = True, f"{ref} ({commit[:9]})"
        try:
            if not (root / "agenthost" / "__init__.py").is_file():
                raise ValueError(f"--baseline {ref!r}: {root} has no agenthost package")
            overlay = Path(tmp, "overlay")
            overlay.mkdir()
            for package in _PACKAGES:
                if (root / package).is_dir():
                    (overlay / package).symlink_to(root / package, target_is_directory=True)
                    # As for this tree: workers must not pay for compiling every module.
                    compileall.compile_dir(root / package, quiet=1)
            (overlay / "bench").symlink_to(BENCH_DIR, target_is_directory=True)
            yield Baseline(label=label, root=root, overlay=overlay)
        finally:
            if made:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(root)],
                    capture_output=True,
                    timeout=120,
                    check=False,
                )
                shutil.rmtree(root, ignore_errors=True)
