"""A configured server that is agenthost's own ``serve``, reading the file that lists it.

Such a server starts itself without end: the README once suggested listing
``agenthost serve`` in a project's ``.mcp.json``, the very file agenthost reads, so each
``serve`` started another ``serve`` (11 processes after 14 s). Two rules stop it:

1. **By its command line** (:func:`self_start_refusal`, applied by the host before a server
   starts): a stdio server whose command runs agenthost with ``serve`` is refused, with
   one line naming the file and the server, unless it passes ``--config FILE`` naming a
   file other than those this host reads (then it reads another config: a gateway in
   front of a gateway). "Runs agenthost" is read through the usual launchers, as far as a
   command line tells: the ``agenthost`` entry point (by name, or the same executable
   through a symlink), ``python -m agenthost``, ``env``, ``npx``/``bunx``/``pnpx``,
   ``uvx``, ``uv run``, ``pipx run``, and ``sh -c '...'`` (the script's words).
2. **By the environment** (:func:`chain_refusal`, checked by the CLI before it loads any
   server): the CLI records the config files it reads in :data:`SERVE_CHAIN_ENV`, appended
   to the value it inherited, and every stdio server inherits that variable. An agenthost
   that finds one of its own config files already in the chain was started, through
   whatever wrapper (a shell script that ``exec``\\ s ``agenthost serve``), by an agenthost
   reading that file: it refuses to start at all, with one line naming the file. A chain
   holding :data:`MAX_CHAIN` files (each agenthost adds its one or two) is refused too,
   whatever the files (a wrapper writing a fresh config for each level), so no chain ever
   grows past it.

A server's own ``env`` cannot set :data:`SERVE_CHAIN_ENV` (the stdio transport keeps the
host's). A server that drops its environment (``env -i``) and whose command line hides
agenthost is beyond both rules; the process tree bounds that one
(:mod:`agenthost.cli.lineage`, Linux).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Collection, Iterable, Mapping, MutableMapping, Sequence
from typing import Final

from agenthost.config.model import ServerConfig

__all__ = [
    "MAX_CHAIN",
    "SERVE_CHAIN_ENV",
    "chain_refusal",
    "extend_chain",
    "files_read",
    "listed_in",
    "self_start_refusal",
]

#: The config files of the agenthost processes above this one, ``os.pathsep``-separated.
SERVE_CHAIN_ENV: Final = "AGENTHOST_SERVE_CHAIN"
#: Config files in the chain (one or two per agenthost) at which the next one refuses.
MAX_CHAIN: Final = 8
#: How many launchers deep a command line is read (``env uvx sh -c '...'``).
_MAX_UNWRAP: Final = 6

_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)*)?[tw]?$")
_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"})
#: Launchers whose first argument that is not an option is the command (or package) run.
_LAUNCHERS: Final = frozenset(
    {"env", "npx", "bunx", "pnpx", "uvx", "uv", "pipx", "pnpm", "yarn", "exec", "nice", "nohup"}
)
#: A package spec naming agenthost: ``agenthost``, ``agenthost@1.2``, ``agenthost==1.2``,
#: ``agenthost[extra]``.
_PACKAGE = re.compile(r"agenthost([@=<>~!\[].*)?$", re.IGNORECASE)


def listed_in(server: ServerConfig, source: str | None) -> str | None:
    """The file that lists ``server``: its project file, else the config's ``source``."""
    if server.scope.startswith("project:"):
        return server.scope.removeprefix("project:")
    return source


def files_read(servers: Iterable[ServerConfig], source: str | None) -> set[str]:
    """Every file a host of these servers reads: ``source`` and the project files."""
    return {f for f in (listed_in(s, source) for s in servers) if f is not None} | (
        {source} if source else set()
    )


def self_start_refusal(
    server: ServerConfig, source: str | None, reads: Collection[str] = ()
) -> str | None:
    """Why ``server`` must not start (rule 1 of the module doc), or ``None``.

    ``source``: the file that lists it (``None``: a config built in code, then only an
    explicit ``--config`` lets an agenthost ``serve`` through); ``reads``: every other
    file this host reads (the user's and the project's): a ``--config`` naming one of them
    is the same loop.
    """
    if server.transport != "stdio" or server.command is None:
        return None
    args = _agenthost_args([server.command, *server.args], 0)
    if args is None or "serve" not in args:
        return None
    named = _config_arg(args)
    if named is not None:
        ours = {os.path.realpath(f) for f in (source, *reads) if f is not None}
        target = os.path.join(server.cwd or os.getcwd(), os.path.expanduser(named))
        if os.path.realpath(target) not in ours:
            return None
    return (
        f"refused: {source or 'the config'} lists {server.name!r}, which runs agenthost serve"
        " on this same config, so it would start itself without end (add agenthost to the"
        " other host at its user or local scope, never in the project file agenthost reads,"
        " or give it its own --config)"
    )


def _config_arg(args: Sequence[str]) -> str | None:
    """The value of agenthost's ``--config`` / ``-c`` in ``args``, or ``None``."""
    for i, word in enumerate(args):
        if word in ("--config", "-c") and i + 1 < len(args):
            return args[i + 1]
        if word.startswith("--config="):
            return word.removeprefix("--config=")
    return None


def chain_refusal(files: Sequence[str], environ: Mapping[str, str]) -> str | None:
    """Why an agenthost reading ``files`` must not start servers (rule 2), or ``None``."""
    chain = _chain(environ)
    for file in files:
        if os.path.realpath(file) in chain:
            return (
                f"refusing to start: this agenthost was started as a server by an agenthost"
                f" reading {file}, which it reads too, so it would start itself without end"
                " (list agenthost at the other host's user or local scope, or give it its"
                " own --config)"
            )
    if len(chain) >= MAX_CHAIN:
        return (
            f"refusing to start: the agenthosts that started this one as a server read"
            f" {len(chain)} config files between them (at most {MAX_CHAIN}); the first was"
            f" {chain[0]}"
        )
    return None


def extend_chain(files: Sequence[str], environ: MutableMapping[str, str]) -> None:
    """Record ``files`` in ``environ``'s chain, for the servers this process starts."""
    chain = [*_chain(environ), *(os.path.realpath(f) for f in files)]
    if chain:
        environ[SERVE_CHAIN_ENV] = os.pathsep.join(chain)


def _chain(environ: Mapping[str, str]) -> list[str]:
    return [p for p in environ.get(SERVE_CHAIN_ENV, "").split(os.pathsep) if p]


def _name(command: str) -> str:
    base = os.path.basename(command).lower()
    for suffix in (".exe", ".cmd", ".bat", ".ps1"):
        base = base.removesuffix(suffix)
    return base


def _own_entry_points() -> set[str]:
    """This installation's ``agenthost`` executables, resolved (a renamed symlink to one
    is still agenthost)."""
    found = {shutil.which("agenthost"), sys.argv[0] if _name(sys.argv[0]) == "agenthost" else None}
    return {os.path.realpath(p) for p in found if p}


def _is_agenthost(command: str) -> bool:
    if _name(command) == "agenthost":
        return True
    resolved = shutil.which(command) if os.sep not in command else command
    return resolved is not None and os.path.realpath(resolved) in _own_entry_points()


def _agenthost_args(argv: Sequence[str], depth: int) -> list[str] | None:
    """The arguments agenthost gets when ``argv`` runs it, or ``None`` when it does not."""
    if not argv or depth > _MAX_UNWRAP:
        return None
    head = _name(argv[0])
    if _is_agenthost(argv[0]):
        return list(argv[1:])
    if _PYTHON.match(head):
        return _python_args(argv)
    if head in _SHELLS:
        return _shell_args(argv, depth)
    if head in _LAUNCHERS:
        for i in range(1, len(argv)):
            word = argv[i]
            if word.startswith("-"):
                continue
            if any(c.isspace() for c in word):  # env -S 'agenthost serve'
                inner = _script_args(word, depth)
                if inner is not None:
                    return inner
                continue
            if _PACKAGE.match(word):  # npx agenthost, uvx --from agenthost ...
                rest = _agenthost_args(argv[i + 1 :], depth + 1)
                return rest if rest is not None else list(argv[i + 1 :])
            inner = _agenthost_args(argv[i:], depth + 1)
            if inner is not None:
                return inner
    return None


def _python_args(argv: Sequence[str]) -> list[str] | None:
    i = 1
    while i < len(argv):
        word = argv[i]
        if word in ("-X", "-W", "--check-hash-based-pycs"):  # options with a value
            i += 2
            continue
        cluster = word[1:] if word.startswith("-") and not word.startswith("--") else ""
        if cluster[:1] in ("W", "X"):  # -Wdefault, -Xdev: a value attached
            i += 1
            continue
        if "c" in cluster.split("m", 1)[0] or word == "-":
            return None  # code on the command line, or a script on stdin
        if "m" in cluster:  # -m agenthost, -magenthost, -Im agenthost
            attached = cluster.split("m", 1)[1]
            module = attached or (argv[i + 1] if i + 1 < len(argv) else "")
            rest = argv[i + 1 :] if attached else argv[i + 2 :]
            return list(rest) if _is_agenthost_module(module) else None
        if word.startswith("-"):
            i += 1
            continue
        # A script: agenthost's own __main__, or its entry point.
        path = os.path.normpath(word)
        if _name(path) == "agenthost" or path.split(os.sep)[-2:] == ["agenthost", "__main__.py"]:
            return list(argv[i + 1 :])
        return None
    return None


def _is_agenthost_module(module: str) -> bool:
    """``agenthost``, or one of its modules run as the main one (``agenthost.__main__``)."""
    return module == "agenthost" or module.startswith("agenthost.")


def _shell_args(argv: Sequence[str], depth: int) -> list[str] | None:
    for i in range(1, len(argv)):
        word = argv[i]
        if not word.startswith("-"):
            return None  # a script file: rule 2 (the environment) is for those
        if "c" in word[1:] and not word.startswith("--") and i + 1 < len(argv):
            return _script_args(argv[i + 1], depth)
    return None


def _script_args(script: str, depth: int) -> list[str] | None:
    """The agenthost arguments of the first command of ``script`` that runs agenthost
    (``cd x && exec agenthost serve``)."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        return None
    command: list[str] = []
    for word in [*words, ";"]:
        if word and set(word) <= set(";&|()"):
            inner = _agenthost_args(command, depth + 1)
            if inner is not None:
                return inner
            command = []
        else:
            command.append(word)
    return None
