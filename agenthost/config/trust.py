"""Trust in project configuration: a discovered file is input from whoever wrote the repository.

A config file starts processes, contacts URLs and hands environment variables to both, so
a file found in the current directory (``./agenthost.toml``, ``./.mcp.json``,
``./.vscode/mcp.json``, ``./.cursor/mcp.json``) is *not loaded at all* until the user has
trusted its exact bytes. This module is the part of that rule that needs no loader:

* :func:`inspect_project` reads the file (and every file it imports) as bytes, digests
  them, and describes what the file would do from the *unexpanded* parsed data: nothing is
  expanded, started or contacted to describe it.
* :func:`agenthost.config.user_only.check_user_only` (beside this module) refuses the keys
  a project file may never set, trusted or not.
* :class:`TrustStore` keeps the user's answers ("trust" bound to the digest, "never" bound
  to the path) in ``$XDG_STATE_HOME/agenthost/trusted-projects.json``: 0600 in a 0700
  directory, beside the approvals file, written under a file lock by atomic replace.

The loader (:mod:`agenthost.config.scope`) takes the digest the user trusted and loads
only a file that still has it; the CLI only asks and prints.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from agenthost.errors import ConfigError
from agenthost.redaction import redact_url

__all__ = [
    "MAX_CONFIG_BYTES",
    "MAX_NESTING",
    "MAX_PROJECT_BYTES",
    "ProjectFile",
    "TrustRecord",
    "TrustStore",
    "Verdict",
    "default_trust_path",
    "describe",
    "diff_summaries",
    "inspect_project",
]

#: A config file larger than this is refused: it is read whole, before anything is trusted.
MAX_CONFIG_BYTES = 1024 * 1024
#: The same for a project file with everything it imports and the env files it reads:
#: all of it is held (the load reads these bytes, not the disk), so all of it is bounded.
MAX_PROJECT_BYTES = 8 * MAX_CONFIG_BYTES
#: The digest recorded for an env file that did not exist (or was no regular file).
_ABSENT = "absent"
#: How deep a config file's tables and arrays may nest (a real one nests under ten).
MAX_NESTING = 64
#: The store is read whole too; a file this large is not ours.
_MAX_STORE_BYTES = 16 * 1024 * 1024
#: How long a command waits for another agenthost process holding the store's lock.
_LOCK_WAIT = 10.0

# ``${NAME}``, ``${env:NAME}`` (editors' files), ``${input:id}``, and the names inside a
# default (``${A:-${B}}`` reads A, then B): every variable a value would read.
_VARIABLE = re.compile(r"\$\{(?:env:)?(input:[^}]+|[A-Za-z_][A-Za-z0-9_]*)")
#: Longest value the summary shows whole: a longer one is cut, saying how much is hidden
#: (a 100,000-character argument would push the rest of the summary out of sight).
MAX_SHOWN = 300
#: The same for a whole table shown as JSON (a policy's rules, an OAuth table).
_MAX_TABLE = 4000

Decision = Literal["trust", "never"]
#: OAuth keys whose literal value is a secret (shown as "a literal secret" in the summary).
_OAUTH_SECRETS = ("client_secret", "private_key", "idp_client_secret", "id_token", "assertion")


def _shown(text: object, limit: int = MAX_SHOWN) -> str:
    """A value from the file, safe on one terminal line: every character that is not
    printable (controls, line breaks, bidi marks and isolates, zero-width marks) escaped,
    and a long value cut, saying how much was left out."""
    raw = str(text)
    cut = len(raw) - limit if len(raw) > limit else 0
    if cut:
        raw = raw[:limit]
    out = "".join(
        c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        for c in raw
    )
    return f"{out}... ({cut} more characters: see the file)" if cut else out


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_bytes(path: Path, *, source: str) -> bytes:
    """The bytes of a regular file, read once: what is digested is what is loaded.

    Opened without blocking and checked on the open descriptor: a FIFO or a device in
    the project (or a link to one) is refused, never waited on or read.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}", path=source) from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(
                "cannot read config file: not a regular file (a FIFO, device or folder); not read",
                path=source,
            )
        try:
            data = f.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            raise ConfigError(
                f"cannot read config file: {exc.strerror or exc}", path=source
            ) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file is larger than {MAX_CONFIG_BYTES} bytes; not read", path=source
        )
    return data


def _depth(value: object) -> int:
    """How deep ``value``'s tables and arrays nest (iterative: no recursion to exhaust)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping | list):
            deepest = max(deepest, level)
            if level <= MAX_NESTING:
                children = item.values() if isinstance(item, Mapping) else item
                stack.extend((child, level + 1) for child in children)
    return deepest


def _parse(data: bytes, path: Path) -> tuple[str, Mapping[str, Any]]:
    """``(dialect, data)`` of a config file, parsed but not expanded.

    A file nested deeper than :data:`MAX_NESTING` is refused: it is no config, and
    everything that walks it (the parsers first) would run out of stack.
    """
    from agenthost.config.jsonc import strip_jsonc

    source = str(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"cannot read config file: not UTF-8 ({exc.reason} at byte {exc.start})", path=source
        ) from None
    suffix = path.suffix.lower()
    is_json = suffix in (".json", ".jsonc") or (
        suffix != ".toml" and text.lstrip("\ufeff \t\r\n").startswith("{")
    )
    parsed: object
    try:
        parsed = json.loads(strip_jsonc(text.lstrip("\ufeff"))) if is_json else tomllib.loads(text)
    except RecursionError:
        parsed = None
    except ValueError as exc:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ConfigError(f"invalid {'JSON' if is_json else 'TOML'}: {exc}", path=source) from None
    if parsed is None or _depth(parsed) > MAX_NESTING:
        raise ConfigError(
            f"tables and arrays nested more than {MAX_NESTING} deep; not a config file",
            path=source,
        )
    if not isinstance(parsed, dict):
        raise ConfigError("the top level must be a JSON object", path=source)
    if not is_json:
        return "toml", parsed
    root: Mapping[str, Any] = parsed
    if "mcpServers" not in root and "servers" not in root and isinstance(root.get("mcp"), dict):
        root = root["mcp"]
    return ("vscode" if "servers" in root else "mcpServers"), root


def _project_root(path: Path) -> Path:
    """The project folder: the file's directory, or its parent for ``.vscode``/``.cursor``."""
    parent = path.parent
    return parent.parent if parent.name in (".vscode", ".cursor") else parent


def _variables(value: object) -> list[str]:
    """The ``${VAR}`` names a value would expand (VS Code ``${input:..}`` included)."""
    found: list[str] = []
    if isinstance(value, str):
        found.extend(_VARIABLE.findall(value))
    elif isinstance(value, Mapping):
        for v in value.values():
            found.extend(_variables(v))
    elif isinstance(value, list):
        for v in value:
            found.extend(_variables(v))
    return found


def _server_summary(table: object, dialect: str) -> dict[str, Any]:
    """What one server entry would do, from its raw (unexpanded) table."""
    if not isinstance(table, Mapping):
        return {"invalid": _shown(type(table).__name__)}
    out: dict[str, Any] = {}
    if "command" in table:
        args = table.get("args", [])
        out["command"] = [table["command"], *(args if isinstance(args, list) else [args])]
    for key in ("cwd", "url", "env_file", "envFile", "transport", "type"):
        if key in table:
            out[key] = table[key]
    for key in ("env", "headers"):
        if isinstance(table.get(key), Mapping):
            out[key] = sorted(table[key])
    for key in ("inherit_env", "autoApprove", "alwaysAllow", "workspaces"):
        if key in table:
            out[key] = table[key]
    for key in ("trusted", "trust", "disabled", "enabled"):
        if key in table:
            out[key] = table[key]
    oauth = table.get("oauth")
    if isinstance(oauth, Mapping):
        # Where a token is asked for and with what: URLs, files, grant. A literal secret
        # is not shown (a variable is named below, like every other one).
        out["oauth"] = {
            str(k): "(a literal secret)" if k in _OAUTH_SECRETS and "$" not in str(v) else v
            for k, v in oauth.items()
        }
    variables = sorted(set(_variables(table)))
    if variables:
        out["variables"] = variables
    return out


def _file_summary(data: Mapping[str, Any], dialect: str) -> dict[str, Any]:
    servers_key = "servers" if dialect in ("toml", "vscode") else "mcpServers"
    servers = data.get(servers_key, {})
    summary: dict[str, Any] = {
        "servers": {
            str(name): _server_summary(entry, dialect)
            for name, entry in (servers.items() if isinstance(servers, Mapping) else ())
        }
    }
    for key in ("import", "workspaces", "policy", "providers", "inherit_env", "inputs"):
        if key in data:
            summary[key] = data[key]
    return summary


@attrs.frozen(kw_only=True)
class ProjectFile:
    """A discovered config file as bytes: who it would run, and the digest to trust."""

    #: The resolved path of the file.
    path: Path
    #: The project folder (imports, workspaces and audit files must stay inside it).
    root: Path
    #: ``"toml"``, ``"mcpServers"`` or ``"vscode"``.
    dialect: str
    #: sha256 of each file's bytes: the file itself, each file it imports, and each env
    #: file its servers read (``"absent"`` for one that did not exist).
    files: Mapping[str, str]
    #: sha256 over ``files``: one byte changed anywhere changes it.
    digest: str
    #: What the file would do (JSON-able, built from unexpanded data); also stored with a
    #: trust record so a later change can be described.
    summary: Mapping[str, Any]
    #: The parsed, unexpanded data of the file itself (for :func:`check_user_only`).
    data: Mapping[str, Any] = attrs.field(repr=False)
    #: The parsed data of each imported file, by resolved path.
    imported: Mapping[str, Mapping[str, Any]] = attrs.field(repr=False)
    #: The bytes of each file, by resolved path: the loader reads these, never the disk
    #: again, so what runs is exactly what was digested (no window to swap a file in).
    contents: Mapping[str, bytes] = attrs.field(factory=dict, repr=False)


def _loader_base(path: Path, dialect: str) -> Path:
    """Where the loader resolves this file's relative paths: an agenthost.toml's folder;
    for an editor's file the project folder (``${workspaceFolder}``), as the editors do."""
    parent = path.parent
    if dialect != "toml" and parent.name in (".vscode", ".cursor"):
        return parent.parent
    return parent


def _literal(raw: str, dialect: str, folder: Path) -> str | None:
    """``raw`` with the editors' path variables put in; None if it reads any other one."""
    if dialect != "toml":
        for name, value in (
            ("${workspaceFolder}", str(folder)),
            ("${userHome}", os.path.expanduser("~")),
            ("${pathSeparator}", os.sep),
            ("${/}", os.sep),
        ):
            raw = raw.replace(name, value)
    return None if "$" in raw else raw


def _within(root: Path, target: Path) -> bool:
    return target == root or root in target.parents


def _read_import(
    raw: object, i: int, resolved: Path, root: Path, source: str
) -> tuple[Path, bytes] | None:
    """``import[i]``'s resolved path and bytes; None when the check refuses it unread."""
    if not isinstance(raw, str):
        return None  # the loader reports the type, naming the key
    if "$" in raw:
        raise ConfigError(
            "a project file's import path must be literal (no ${VAR}): it is read"
            " before anything in the file is trusted",
            path=source,
            key=f"import[{i}]",
        )
    target = Path(os.path.expanduser(raw))
    target = (target if target.is_absolute() else resolved.parent / target).resolve()
    if not _within(root, target):
        return None  # check_user_only refuses it, naming the key: never read
    try:
        return target, _read_bytes(target, source=str(target))
    except ConfigError as exc:
        raise ConfigError(
            f"{_shown(target)}: {exc.problem}", path=source, key=f"import[{i}]"
        ) from None


def _read_env_files(
    resolved: Path,
    data: Mapping[str, Any],
    dialect: str,
    imported: Mapping[str, Mapping[str, Any]],
    root: Path,
    contents: dict[str, bytes],
) -> set[str]:
    """Add the env files the servers read to ``contents``; the paths of those that are not
    there (or not regular files) come back, so that creating one later is a change.

    An env file's values go into a server's environment, where ``NODE_OPTIONS`` or
    ``LD_PRELOAD`` make even a well-known command run the repository's code: it is part
    of what the user trusts, like an import. Paths the user-only check refuses (outside
    the project, with a variable) are not read.
    """
    absent: set[str] = set()
    sources = [
        (resolved, data, dialect),
        *((Path(p), d, "mcpServers") for p, d in imported.items()),
    ]
    for path, file_data, file_dialect in sources:
        servers = file_data.get("mcpServers", file_data.get("servers", {}))
        base = _loader_base(path, file_dialect)
        for table in servers.values() if isinstance(servers, Mapping) else ():
            for key in ("env_file", "envFile"):
                raw = table.get(key) if isinstance(table, Mapping) else None
                literal = _literal(raw, file_dialect, base) if isinstance(raw, str) else None
                if literal is None:
                    continue
                target = (base / os.path.expanduser(literal)).resolve()
                if not _within(root, target) or str(target) in contents:
                    continue
                try:
                    contents[str(target)] = _read_bytes(target, source=str(target))
                except ConfigError:
                    absent.add(str(target))  # the loader refuses it: it is not in contents
                if sum(map(len, contents.values())) > MAX_PROJECT_BYTES:
                    raise ConfigError(
                        f"the file, its imports and env files are larger than"
                        f" {MAX_PROJECT_BYTES} bytes in all; not read further",
                        path=str(path),
                    )
    return absent


def _project_file(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """The project folder of a config file and the file's resolved path: what trust (and
    its revocation) is bound to.

    Raises:
        ConfigError: the config is a link to a file outside its project.
    """
    given = Path(os.path.abspath(path))
    root = _project_root(given).resolve()
    resolved = given.resolve()
    if not _within(root, resolved):
        raise ConfigError(
            f"this project config is a link to {_shown(resolved)}, outside the project"
            f" ({_shown(root)}); not read: a link may not bring another folder's config"
            " (or its trust) here",
            path=str(path),
        )
    return root, resolved


def inspect_project(path: str | os.PathLike[str]) -> ProjectFile:
    """Read a project config and the files it imports as bytes; describe, never expand.

    The project is the folder the file was found in (its parent for ``.vscode/`` and
    ``.cursor/``); a config that is a link to a file outside it is refused: trust is bound
    to the resolved path, and another folder's trusted file must not run here, in this
    repository's folder, with its relative paths meaning this repository's files.

    Raises:
        ConfigError: a file cannot be read or parsed, is not a regular file, the config
            links out of its project, or an import path uses a variable (a project
            file's imports are digested before anything is expanded).
    """
    root, resolved = _project_file(path)
    source = str(path)
    data_bytes = _read_bytes(resolved, source=source)
    dialect, data = _parse(data_bytes, resolved)
    contents = {str(resolved): data_bytes}
    summary = _file_summary(data, dialect)
    summary["file"] = str(resolved)
    imported: dict[str, Mapping[str, Any]] = {}
    raw_imports = data.get("import", []) if dialect == "toml" else []
    for i, raw in enumerate(raw_imports if isinstance(raw_imports, list) else []):
        found = _read_import(raw, i, resolved, root, source)
        if found is None or str(found[0]) in contents:
            continue
        target, raw_bytes = found
        contents[str(target)] = raw_bytes
        if sum(map(len, contents.values())) > MAX_PROJECT_BYTES:
            raise ConfigError(
                f"the file and its imports are larger than {MAX_PROJECT_BYTES} bytes in all;"
                " not read further",
                path=source,
                key=f"import[{i}]",
            )
        sub_dialect, sub = _parse(raw_bytes, target)
        imported[str(target)] = sub
        servers = summary["servers"]
        for name, entry in _file_summary(sub, sub_dialect)["servers"].items():
            # A table of the same name in this file adds host settings to the imported
            # server: the summary shows both (the command line is the imported one).
            merged = {**entry, **servers.get(name, {}), "from": str(target)}
            variables = {*entry.get("variables", ()), *servers.get(name, {}).get("variables", ())}
            if variables:
                merged["variables"] = sorted(variables)
            servers[name] = merged
    absent = _read_env_files(resolved, data, dialect, imported, root, contents)
    files = {p: _sha256(b) for p, b in contents.items()}
    files.update(dict.fromkeys(absent, _ABSENT))
    digest = _sha256(json.dumps(sorted(files.items())).encode())
    return ProjectFile(
        path=resolved,
        root=root,
        dialect=dialect,
        files=files,
        digest=digest,
        summary=summary,
        data=data,
        imported=imported,
        contents=contents,
    )


# -- describing ----------------------------------------------------------------------------


def _shown_url(url: object) -> object:
    """A URL without a literal password or query values (the file may hold a token)."""
    if not isinstance(url, str):
        return url
    try:
        return redact_url(url)
    except ValueError:
        return url


def _shown_arg(part: object) -> str:
    """One word of a command line: quoted when it holds spaces (or is empty or not a
    string), so ``sh -c "a b"`` cannot read as ``sh -c a b``."""
    if isinstance(part, str) and part and not any(c.isspace() or c in "\"'" for c in part):
        return _shown(part)
    return _shown(json.dumps(part, ensure_ascii=False))


def _server_lines(name: str, s: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    origin = f" (from {_shown(s['from'])})" if "from" in s else ""
    if "command" in s:
        cmd = _shown(" ".join(map(_shown_arg, s["command"])), limit=_MAX_TABLE)
        lines.append(f"  run     {_shown(name)}: {cmd}{origin}")
        lines.append(f"          cwd: {_shown(s.get('cwd', '(the project folder)'))}")
        if "env" in s:
            lines.append(f"          env keys: {', '.join(_shown(k) for k in s['env'])}")
        for k in ("env_file", "envFile"):
            if k in s:
                lines.append(f"          env file: {_shown(s[k])}")
    elif "url" in s:
        lines.append(f"  contact {_shown(name)}: {_shown(_shown_url(s['url']))}{origin}")
        if "headers" in s:
            lines.append(f"          header keys: {', '.join(_shown(k) for k in s['headers'])}")
    else:
        lines.append(f"  server  {_shown(name)}: {_shown(json.dumps(s))}{origin}")
    if "inherit_env" in s:
        lines.append(f"          inherits your env: {_shown(json.dumps(s['inherit_env']))}")
    if "variables" in s:
        lines.append(f"          expands your variables: {', '.join(map(_shown, s['variables']))}")
    for k in ("trusted", "trust", "autoApprove", "alwaysAllow", "workspaces", "oauth"):
        if k in s:
            lines.append(f"          {k}: {_shown(json.dumps(s[k]), limit=_MAX_TABLE)}")
    return lines


def describe(summary: Mapping[str, Any]) -> list[str]:
    """The summary as lines for a person: every command, URL, variable and host setting."""
    lines = [f"project config {_shown(summary.get('file', '?'))} would:"]
    servers = summary.get("servers", {})
    for name, s in servers.items():
        lines.extend(_server_lines(name, s))
    if not servers:
        lines.append("  (configure no servers)")
    for key, label in (
        ("import", "import"),
        ("inherit_env", "pass your env"),
        ("workspaces", "expose"),
        ("policy", "policy"),
        ("providers", "providers"),
        ("inputs", "inputs"),
    ):
        if key in summary:
            shown = _shown(json.dumps(summary[key], default=str), limit=_MAX_TABLE)
            lines.append(f"  {label}: {shown}")
    policy = summary.get("policy")
    if isinstance(policy, Mapping) and "audit" in policy:
        lines.append(f"  audit log: {_shown(json.dumps(policy['audit']))}")
    return lines


def diff_summaries(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What changed between the trusted summary and the file now, one line per change."""
    changes: list[str] = []
    before, after = old.get("servers", {}), new.get("servers", {})
    for name in after:
        if name not in before:
            changes.append(f"server {_shown(name)} added")
        elif before[name] != after[name]:
            keys = sorted(
                k
                for k in set(before[name]) | set(after[name])
                if before[name].get(k) != after[name].get(k)
            )
            changes.append(f"server {_shown(name)} changed ({', '.join(map(_shown, keys))})")
    changes += [f"server {_shown(name)} removed" for name in before if name not in after]
    for key in ("import", "inherit_env", "workspaces", "policy", "providers", "inputs"):
        if old.get(key) != new.get(key):
            changes.append(f"{key} changed")
    return changes


# -- the store -----------------------------------------------------------------------------


def default_trust_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_STATE_HOME/agenthost/trusted-projects.json`` (beside the approvals file)."""
    environ = os.environ if env is None else env
    state = environ.get("XDG_STATE_HOME", "")
    base = Path(state) if state and os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "agenthost" / "trusted-projects.json"


@attrs.frozen(kw_only=True)
class TrustRecord:
    """One answer: ``trust`` binds the digest, ``never`` binds the path whatever it holds."""

    path: str
    decision: Decision
    digest: str
    #: Digest of each file (the config, then its imports), to say which one changed.
    files: Mapping[str, str]
    summary: Mapping[str, Any]
    at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "decision": self.decision,
            "digest": self.digest,
            "files": dict(self.files),
            "summary": self.summary,
            "at": self.at,
        }

    @classmethod
    def from_json(cls, raw: object) -> TrustRecord:
        """A record read back from the store, checked: the file is the user's, but a
        damaged or hand-edited one must be a clear error, never a traceback later.

        Raises:
            ValueError: a field of the wrong type or shape.
        """
        if not isinstance(raw, Mapping):
            raise ValueError("a record is not a table")
        path, decision = raw.get("path"), raw.get("decision")
        digest, at = raw.get("digest", ""), raw.get("at", "")
        files, summary = raw.get("files", {}), raw.get("summary", {})
        if not (
            isinstance(path, str)
            and isinstance(digest, str)
            and isinstance(at, str)
            and decision in ("trust", "never")
        ):
            raise ValueError("a record's path, decision, digest or time is not valid")
        if not isinstance(files, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            raise ValueError("a record's files are not a table of digests")
        servers = summary.get("servers", {}) if isinstance(summary, Mapping) else None
        if not isinstance(servers, Mapping) or not all(
            isinstance(v, Mapping) for v in servers.values()
        ):
            raise ValueError("a record's summary is not a table of servers")
        return cls(
            path=path,
            decision="never" if decision == "never" else "trust",
            digest=digest,
            files=dict(files),
            summary=dict(summary),
            at=at,
        )


@attrs.frozen(kw_only=True)
class Verdict:
    """What the store says about a project file as it is now."""

    state: Literal["trusted", "untrusted", "changed", "never"]
    record: TrustRecord | None = None
    #: For ``changed``: which files changed and what the summaries say changed.
    changes: Sequence[str] = ()


class TrustStore:
    """The user's trust answers for project config files.

    Every method does small blocking file I/O; the CLI calls it before the host starts.
    Writes take an exclusive ``fcntl`` lock on a sibling ``.lock`` file (bounded wait) and
    replace the file atomically, so concurrent agenthost processes lose no answer and a
    crash leaves the old file or the new one, never half of one.

    Args:
        path: the JSON file; default :func:`default_trust_path`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_trust_path()

    def _read(self) -> list[TrustRecord]:
        try:
            with self.path.open("rb") as f:
                raw = f.read(_MAX_STORE_BYTES + 1)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ConfigError(
                f"cannot read the trust store: {exc.strerror or exc}", path=str(self.path)
            ) from None
        try:
            data = json.loads(raw) if len(raw) <= _MAX_STORE_BYTES else None
            records = [TrustRecord.from_json(r) for r in data["projects"]]  # type: ignore[index]
        except (ValueError, TypeError, KeyError, RecursionError):
            raise ConfigError(
                "the trust store is not valid; fix it or delete it (every project is then"
                " untrusted again)",
                path=str(self.path),
            ) from None
        return records

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        directory = self.path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path.with_name(self.path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + _LOCK_WAIT
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() > deadline:
                        raise ConfigError(
                            f"another agenthost holds the trust store's lock for over"
                            f" {_LOCK_WAIT:.0f} s",
                            path=str(self.path),
                        ) from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _write(self, records: list[TrustRecord]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        payload = json.dumps({"projects": [r.to_json() for r in records]}, indent=1).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise

    def records(self) -> list[TrustRecord]:
        """Every recorded answer, oldest first."""
        return self._read()

    def verdict(self, project: ProjectFile) -> Verdict:
        """Whether ``project`` as it is now is trusted, never to be, unknown, or changed."""
        record = next((r for r in self._read() if r.path == str(project.path)), None)
        if record is None:
            return Verdict(state="untrusted")
        if record.decision == "never":
            return Verdict(state="never", record=record)
        if record.digest == project.digest:
            return Verdict(state="trusted", record=record)
        changed = [
            f"{_shown(p)} changed" if p in record.files else f"{_shown(p)} is new"
            for p, d in project.files.items()
            if record.files.get(p) != d
        ]
        changed += [
            f"{_shown(p)} no longer imported" for p in record.files if p not in project.files
        ]
        changed += diff_summaries(record.summary, project.summary)
        return Verdict(state="changed", record=record, changes=changed)

    def record(self, project: ProjectFile, decision: Decision) -> TrustRecord:
        """Remember ``decision`` for ``project`` (replacing any earlier answer for its path)."""
        entry = TrustRecord(
            path=str(project.path),
            decision=decision,
            digest=project.digest,
            files=project.files,
            summary=project.summary,
            at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        )
        with self._locked():
            records = [r for r in self._read() if r.path != entry.path]
            self._write([*records, entry])
        return entry

    def revoke(self, path: str | os.PathLike[str] | None = None) -> list[TrustRecord]:
        """Forget the answer for ``path`` (a config file or project folder), or every answer.

        A config file is taken as :func:`inspect_project` takes it (the answer was recorded
        for that): a link inside its project is the file it names; a link out of it is
        refused, so a repository's link cannot make this forget another project's answer.

        Raises:
            ConfigError: ``path`` is a config that links out of its project.
        """
        folder = path is not None and Path(path).is_dir()
        homes = _homes(Path(path).resolve()) if path is not None and folder else set()
        target = str(_project_file(path)[1]) if path is not None and not folder else None
        with self._locked():
            records = self._read()
            if path is None:
                gone, kept = records, []
            else:
                gone = [r for r in records if r.path == target or Path(r.path).parent in homes]
                kept = [r for r in records if r not in gone]
            if gone:
                self._write(kept)
        return gone


def _homes(folder: Path) -> set[Path]:
    """The directories a project folder's config files live in."""
    return {folder, folder / ".vscode", folder / ".cursor"}
