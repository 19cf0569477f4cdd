"""Trust in project configuration: a discovered file is input from whoever wrote the repository.

A config file starts processes, contacts URLs and hands environment variables to both, so
a file found in the current directory (``./agenthost.toml``, ``./.mcp.json``,
``./.vscode/mcp.json``, ``./.cursor/mcp.json``) is *not loaded at all* until the user has
trusted its exact bytes. This module is the part of that rule that needs no loader:

* :func:`inspect_project` reads the file (and every file it imports) as bytes, digests
  them, and describes what the file would do from the *unexpanded* parsed data: nothing is
  expanded, started or contacted to describe it.
* :func:`check_user_only` refuses the keys a project file may never set, trusted or not
  (they would let the repository weaken the user's own security settings).
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
    "ProjectFile",
    "TrustRecord",
    "TrustStore",
    "Verdict",
    "check_user_only",
    "default_trust_path",
    "describe",
    "diff_summaries",
    "inspect_project",
]

#: A config file larger than this is refused: it is read whole, before anything is trusted.
MAX_CONFIG_BYTES = 1024 * 1024
#: The store is read whole too; a file this large is not ours.
_MAX_STORE_BYTES = 16 * 1024 * 1024
#: How long a command waits for another agenthost process holding the store's lock.
_LOCK_WAIT = 10.0

_VARIABLE = re.compile(r"\$\{(input:[^}]+|[^}:]+)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")

Decision = Literal["trust", "never"]


def _shown(text: object) -> str:
    """A value from the file, safe on one terminal line: every control character escaped."""

    def esc(m: re.Match[str]) -> str:
        code = ord(m.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(esc, str(text))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_bytes(path: Path, *, source: str) -> bytes:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}", path=source) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file is larger than {MAX_CONFIG_BYTES} bytes; not read", path=source
        )
    return data


def _parse(data: bytes, path: Path) -> tuple[str, Mapping[str, Any]]:
    """``(dialect, data)`` of a config file, parsed but not expanded."""
    from agenthost.config.loader import strip_jsonc

    source = str(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"cannot read config file: not UTF-8 ({exc.reason} at byte {exc.start})", path=source
        ) from None
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonc") or (
        suffix != ".toml" and text.lstrip("\ufeff \t\r\n").startswith("{")
    ):
        try:
            parsed = json.loads(strip_jsonc(text.lstrip("\ufeff")))
        except ValueError as exc:
            raise ConfigError(f"invalid JSON: {exc}", path=source) from None
        if not isinstance(parsed, dict):
            raise ConfigError("the top level must be a JSON object", path=source)
        root: Mapping[str, Any] = parsed
        if "mcpServers" not in root and "servers" not in root and isinstance(root.get("mcp"), dict):
            root = root["mcp"]
        return ("vscode" if "servers" in root else "mcpServers"), root
    try:
        return "toml", tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", path=source) from None


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
    variables = sorted(set(_variables({k: v for k, v in table.items() if k != "oauth"})))
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
    #: sha256 of each file's bytes: the file itself, then each file it imports.
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


def inspect_project(path: str | os.PathLike[str]) -> ProjectFile:
    """Read a project config and the files it imports as bytes; describe, never expand.

    Raises:
        ConfigError: a file cannot be read or parsed, or an import path uses a variable
            (a project file's imports are digested before anything is expanded).
    """
    resolved = Path(path).resolve()
    source = str(path)
    data_bytes = _read_bytes(resolved, source=source)
    dialect, data = _parse(data_bytes, resolved)
    files = {str(resolved): _sha256(data_bytes)}
    summary = _file_summary(data, dialect)
    summary["file"] = str(resolved)
    imported: dict[str, Mapping[str, Any]] = {}
    raw_imports = data.get("import", []) if dialect == "toml" else []
    if isinstance(raw_imports, list):
        for i, raw in enumerate(raw_imports):
            if not isinstance(raw, str):
                continue  # the loader reports the type, naming the key
            if "$" in raw:
                raise ConfigError(
                    "a project file's import path must be literal (no ${VAR}): it is read"
                    " before anything in the file is trusted",
                    path=source,
                    key=f"import[{i}]",
                )
            target = Path(os.path.expanduser(raw))
            target = (target if target.is_absolute() else resolved.parent / target).resolve()
            if not target.is_file():
                continue  # the loader reports it when the file is used
            raw_bytes = _read_bytes(target, source=str(target))
            files[str(target)] = _sha256(raw_bytes)
            sub_dialect, sub = _parse(raw_bytes, target)
            imported[str(target)] = sub
            for name, entry in _file_summary(sub, sub_dialect)["servers"].items():
                summary["servers"].setdefault(name, {**entry, "from": str(target)})
    digest = _sha256(json.dumps(sorted(files.items())).encode())
    return ProjectFile(
        path=resolved,
        root=_project_root(resolved),
        dialect=dialect,
        files=files,
        digest=digest,
        summary=summary,
        data=data,
        imported=imported,
    )


# -- what a project file may not set, even trusted ----------------------------------------


def _inside(root: Path, raw: str, base: Path) -> bool:
    target = Path(os.path.expanduser(raw))
    target = (target if target.is_absolute() else base / target).resolve()
    return target == root or root in target.parents


def _not_ours(path: Path, kind: Literal["audit", "approvals"]) -> bool:
    """True when ``path`` exists and is not an audit log / approvals file (nor empty)."""
    try:
        if not path.exists():
            return False
        if not path.is_file():
            return True
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return True
    if not head.strip():
        return False
    if kind == "approvals":
        return not head.lstrip().startswith(b"{")
    first = head.splitlines()[0]
    try:
        record = json.loads(first)
    except ValueError:
        return True
    return not isinstance(record, dict) or "event" not in record


def _policy_violations(
    policy: Mapping[str, Any], project: ProjectFile, key: str
) -> Iterator[tuple[str, str]]:
    base = project.path.parent
    for k in ("mode", "preset"):
        if k in policy:
            yield (
                f"{key}.{k}",
                f"a project file may not set the policy {k} (only the user's own config may:"
                " it decides what runs without asking)",
            )
    if "file" in policy:
        yield (f"{key}.file", "a project file may not replace the policy with another file")
    rules = policy.get("rules", [])
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, Mapping) and rule.get("decision") not in ("deny", "ask"):
            yield (
                f"{key}.rules[{i}].decision",
                "a project file may add rules that deny or ask, never one that allows",
            )
    kinds: tuple[Literal["audit", "approvals"], ...] = ("audit", "approvals")
    for k in kinds:
        value = policy.get(k)
        if isinstance(value, Mapping):
            value = value.get("path")
        if not isinstance(value, str):
            continue
        where = f"{key}.{k}"
        if "$" in value:
            yield (where, f"a project file's {k} path must be literal (no ${{VAR}})")
        elif not _inside(project.root, value, base):
            yield (where, f"a project file may not put the {k} file outside the project")
        else:
            target = Path(os.path.expanduser(value))
            target = target if target.is_absolute() else base / target
            if _not_ours(target.resolve(), k):
                yield (where, f"{value!r} exists and is not an {k} file; not overwritten")


def _server_violations(
    table: object, key: str, project: ProjectFile, base: Path
) -> Iterator[tuple[str, str]]:
    if not isinstance(table, Mapping):
        return
    for k in ("env_file", "envFile"):
        raw = table.get(k)
        if not isinstance(raw, str):
            continue
        # An env file is read by the host and its values handed to the server: outside
        # the project it could be any secret file of the user's (~/.aws/credentials).
        if "$" in raw:
            yield (f"{key}.{k}", "a project file's env file path must be literal (no ${VAR})")
        elif not _inside(project.root, raw, base):
            yield (
                f"{key}.{k}",
                f"a project file may not read an env file outside the project ({project.root}):"
                " its values would go to the server",
            )
    if table.get("trusted") is True or table.get("trust") is True:
        k = "trusted" if "trusted" in table else "trust"
        yield (
            f"{key}.{k}",
            "a project file may not mark a server trusted (its tool annotations would decide"
            " what runs without asking); set it in your own config",
        )
    for k in ("autoApprove", "alwaysAllow"):
        if table.get(k):
            yield (
                f"{key}.{k}",
                "a project file may not approve tools in advance; approve them when asked,"
                " or add an allow rule to your own config",
            )


def _violations(project: ProjectFile) -> Iterator[tuple[str, str, str]]:
    """``(file, key, problem)`` for every user-only key in the project file or its imports."""
    data, source = project.data, str(project.path)
    files = [(source, data), *project.imported.items()]
    for path, file_data in files:
        skey = "mcpServers" if "mcpServers" in file_data else "servers"
        servers = file_data.get(skey, {})
        for name, entry in servers.items() if isinstance(servers, Mapping) else ():
            violations = _server_violations(entry, f"{skey}.{name}", project, Path(path).parent)
            for key, problem in violations:
                yield path, key, problem
    policy = data.get("policy")
    if isinstance(policy, Mapping):
        for key, problem in _policy_violations(policy, project, "policy"):
            yield source, key, problem
    providers = data.get("providers")
    if isinstance(providers, Mapping):
        for name, entry in providers.items():
            if not isinstance(entry, Mapping):
                continue
            for k in ("base_url", "api_key_env"):
                if k in entry:
                    yield (
                        source,
                        f"providers.{name}.{k}",
                        f"a project file may not set a provider's {k} (it decides where your"
                        " API key is sent)",
                    )
    workspaces = data.get("workspaces")
    for i, entry in enumerate(workspaces if isinstance(workspaces, list) else []):
        raw = entry.get("path") if isinstance(entry, Mapping) else entry
        if not isinstance(raw, str):
            continue
        if "$" in raw:
            yield source, f"workspaces[{i}]", "a project file's workspace path must be literal"
        elif not _inside(project.root, raw, project.path.parent):
            yield (
                source,
                f"workspaces[{i}]",
                f"a project file may not expose a workspace outside the project ({project.root})",
            )
    imports = data.get("import")
    for i, raw in enumerate(imports if isinstance(imports, list) else []):
        if isinstance(raw, str) and not _inside(project.root, raw, project.path.parent):
            yield (
                source,
                f"import[{i}]",
                f"a project file may not import a file outside the project ({project.root})",
            )


def check_user_only(project: ProjectFile) -> None:
    """Refuse a project file that sets a key only the user's own config may set.

    Checked on the unexpanded data, at ``agenthost trust`` and at every use, trusted or
    not: trust says "run these servers", never "let this repository change my security".

    Raises:
        ConfigError: the first such key (file, key path, and why).
    """
    for path, key, problem in _violations(project):
        raise ConfigError(f"{problem} (a user-only setting)", path=path, key=key)


# -- describing ----------------------------------------------------------------------------


def _shown_url(url: object) -> object:
    """A URL without a literal password or query values (the file may hold a token)."""
    if not isinstance(url, str):
        return url
    try:
        return redact_url(url)
    except ValueError:
        return url


def _server_lines(name: str, s: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    origin = f" (from {_shown(s['from'])})" if "from" in s else ""
    if "command" in s:
        cmd = " ".join(_shown(json.dumps(p) if not isinstance(p, str) else p) for p in s["command"])
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
    for k in ("trusted", "trust", "autoApprove", "alwaysAllow", "workspaces"):
        if k in s:
            lines.append(f"          {k}: {_shown(json.dumps(s[k]))}")
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
            lines.append(f"  {label}: {_shown(json.dumps(summary[key], default=str))}")
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
    def from_json(cls, raw: Mapping[str, Any]) -> TrustRecord:
        return cls(
            path=str(raw["path"]),
            decision="never" if raw.get("decision") == "never" else "trust",
            digest=str(raw.get("digest", "")),
            files=dict(raw.get("files", {})),
            summary=dict(raw.get("summary", {})),
            at=str(raw.get("at", "")),
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
        except (ValueError, TypeError, KeyError):
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
            f"{p} changed" if p in record.files else f"{p} is new"
            for p, d in project.files.items()
            if record.files.get(p) != d
        ]
        changed += [f"{p} no longer imported" for p in record.files if p not in project.files]
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
        """Forget the answer for ``path`` (a config file or project folder), or every answer."""
        with self._locked():
            records = self._read()
            if path is None:
                gone, kept = records, []
            else:
                target = Path(path).resolve()
                homes = _homes(target) if target.is_dir() else set()
                gone = [r for r in records if r.path == str(target) or Path(r.path).parent in homes]
                kept = [r for r in records if r not in gone]
            if gone:
                self._write(kept)
        return gone


def _homes(folder: Path) -> set[Path]:
    """The directories a project folder's config files live in."""
    return {folder, folder / ".vscode", folder / ".cursor"}
