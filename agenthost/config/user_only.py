"""What a project file may never set, even trusted: the user-only keys.

Trust says "run these servers", never "let this repository change my security". So a
project file (and every file it imports) is checked on its *unexpanded* data, at
``agenthost trust`` and at every use, and refused with a one-line error naming the key
and why (never silently ignored). The rules, with docs/config.md's table:

* nothing that decides what runs without asking: the policy ``mode``, ``preset``,
  ``file``, an ``allow`` rule, ``trusted``/``trust``/``autoApprove``, and the approvals
  file (a repository's own approvals file would hold its own "always" answers; only
  ``approvals = false``, remember nothing, is stricter and allowed);
* nothing that reads, or sends, a file of the user's: every path the host reads or
  hands a server must resolve inside the project (``env_file``, ``cwd``, OAuth
  ``private_key_file`` and ``assertion_file``, a scripted provider's ``script``,
  ``import``, ``workspaces``), literally (no ``${VAR}``, but the editors'
  ``${workspaceFolder}``), resolved against the folder *the loader* resolves it against
  (an editor's file: the project folder, not ``.vscode/``);
* nothing the host writes outside the project (``policy.audit``, and never
  ``policy.audit_database``), nor over a file that is not an audit log;
* nothing that decides where the user's API key goes (a provider's ``base_url``,
  ``api_key_env``), nor who answers servers' sampling requests (``[gateway]``);
* nothing about how durable runs reach Temporal (``[temporal]``: its address, the
  certificates trusted, the API key file sent, the durable-run key file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agenthost.config.trust import ProjectFile, _literal, _loader_base
from agenthost.config.values import join_key
from agenthost.errors import ConfigError

__all__ = ["check_user_only"]

#: Why a path of each kind must stay inside the project (``{root}``: the project folder).
_PATH_WHY = {
    "env_file": "read an env file outside the project ({root}): its values would go to the server",
    "cwd": "run a server in a folder outside the project ({root}): its relative paths"
    " would mean that folder's files",
    "private_key_file": "read a private key outside the project ({root}): it would sign"
    " for an authorization server the file chooses",
    "assertion_file": "send a file outside the project ({root}) as an OAuth assertion: it"
    " would go to an authorization server the file chooses",
    "script": "replay a script outside the project ({root}) as a model's answers",
    "workspace": "expose a workspace outside the project ({root})",
    "import": "import a file outside the project ({root})",
    "audit": "put the audit file outside the project ({root})",
}


def _inside(root: Path, raw: str, base: Path) -> bool:
    target = Path(os.path.expanduser(raw))
    target = (target if target.is_absolute() else base / target).resolve()
    return target == root or root in target.parents


def _path_problem(
    raw: object, kind: str, project: ProjectFile, base: Path, dialect: str
) -> str | None:
    """Why the path ``raw`` (of ``kind``, see :data:`_PATH_WHY`) is refused, or None."""
    if not isinstance(raw, str):
        return None  # the loader reports the type, naming the key
    literal = _literal(raw, dialect, base)
    if literal is None:
        return (
            f"a project file's {kind} path must be literal (no ${{VAR}}; an editor's"
            " ${workspaceFolder} is fine): it is checked before anything is expanded"
        )
    if not _inside(project.root, literal, base):
        return "a project file may not " + _PATH_WHY[kind].format(root=project.root)
    return None


def _not_an_audit_log(path: Path) -> bool:
    """True when ``path`` exists and is not an audit log (nor empty)."""
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
    try:
        record = json.loads(head.splitlines()[0])
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
    if "project" in policy:
        yield (f"{key}.project", "is where agenthost puts a project's rules; not settable")
    rules = policy.get("rules", [])
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, Mapping) and rule.get("decision") not in ("deny", "ask"):
            yield (
                f"{key}.rules[{i}].decision",
                "a project file may add rules that deny or ask, never one that allows",
            )
    if "approvals" in policy and policy["approvals"] is not False:
        # The approvals file holds "always" answers: a repository's own file would be its
        # own pre-approvals, and `true` would bring the user's answers into headless runs.
        yield (
            f"{key}.approvals",
            "a project file may not choose where remembered answers come from (they decide"
            " what runs without asking); only false (remember nothing) is allowed",
        )
    if "audit_database" in policy:
        yield (
            f"{key}.audit_database",
            "a project file may not send the audit to a database (it would read every"
            " call you make); set it in your own config",
        )
    audit = policy.get("audit")
    raw = audit.get("path") if isinstance(audit, Mapping) else audit
    if isinstance(raw, str):
        problem = _path_problem(raw, "audit", project, base, "toml")
        if problem is None and _not_an_audit_log((base / os.path.expanduser(raw)).resolve()):
            problem = f"{raw!r} exists and is not an audit file; not overwritten"
        if problem is not None:
            yield f"{key}.audit", problem


def _server_paths(table: Mapping[str, Any]) -> Iterator[tuple[str, str, object]]:
    """``(key, kind, value)`` of every path in a server table that the host reads or uses."""
    for k in ("env_file", "envFile", "cwd"):
        if k in table:
            yield k, "cwd" if k == "cwd" else "env_file", table[k]
    oauth = table.get("oauth")
    if isinstance(oauth, Mapping):
        for k in ("private_key_file", "assertion_file"):
            if k in oauth:
                yield f"oauth.{k}", k, oauth[k]


def _server_violations(
    table: object, key: str, project: ProjectFile, file: Path, dialect: str
) -> Iterator[tuple[str, str]]:
    if not isinstance(table, Mapping):
        return
    base = _loader_base(file, dialect)
    for k, kind, raw in _server_paths(table):
        problem = _path_problem(raw, kind, project, base, dialect)
        if problem is not None:
            yield f"{key}.{k}", problem
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


def _provider_violations(providers: object, project: ProjectFile) -> Iterator[tuple[str, str]]:
    for name, entry in providers.items() if isinstance(providers, Mapping) else ():
        if not isinstance(entry, Mapping):
            continue
        key = join_key("providers", str(name))
        for k in ("base_url", "api_key_env"):
            if k in entry:
                yield (
                    f"{key}.{k}",
                    f"a project file may not set a provider's {k} (it decides where your"
                    " API key is sent)",
                )
        problem = _path_problem(entry.get("script"), "script", project, project.path.parent, "toml")
        if problem is not None:
            yield f"{key}.script", problem


def _violations(project: ProjectFile) -> Iterator[tuple[str, str, str]]:
    """``(file, key, problem)`` for every user-only key in the project file or its imports."""
    data, source = project.data, str(project.path)
    files = [(source, data, project.dialect)]
    files += [(path, sub, "mcpServers") for path, sub in project.imported.items()]
    for path, file_data, dialect in files:
        skey = "mcpServers" if "mcpServers" in file_data else "servers"
        servers = file_data.get(skey, {})
        for name, entry in servers.items() if isinstance(servers, Mapping) else ():
            key = join_key(skey, str(name))
            for k, problem in _server_violations(entry, key, project, Path(path), dialect):
                yield path, k, problem
    policy = data.get("policy")
    if isinstance(policy, Mapping):
        for key, problem in _policy_violations(policy, project, "policy"):
            yield source, key, problem
    for key, problem in _provider_violations(data.get("providers"), project):
        yield source, key, problem
    if "gateway" in data:
        yield (
            source,
            "gateway",
            "a project file may not decide where servers' sampling requests go (your"
            " providers, or the model of the host agenthost serves)",
        )
    if "temporal" in data:
        yield (
            source,
            "temporal",
            "a project file may not decide how durable runs reach Temporal (where the"
            " runs and your API key go, which certificates are trusted, which key signs"
            " your runs)",
        )
    for key, problem in _top_path_violations(data, project):
        yield source, key, problem


def _top_path_violations(
    data: Mapping[str, Any], project: ProjectFile
) -> Iterator[tuple[str, str]]:
    """The file's own ``workspaces`` and ``import`` paths."""
    workspaces = data.get("workspaces")
    base = _loader_base(project.path, project.dialect)
    for i, entry in enumerate(workspaces if isinstance(workspaces, list) else []):
        raw = entry.get("path") if isinstance(entry, Mapping) else entry
        problem = _path_problem(raw, "workspace", project, base, project.dialect)
        if problem is not None:
            yield f"workspaces[{i}]", problem
    imports = data.get("import")
    for i, raw in enumerate(imports if isinstance(imports, list) else []):
        problem = _path_problem(raw, "import", project, project.path.parent, "toml")
        if problem is not None:
            yield f"import[{i}]", problem


def check_user_only(project: ProjectFile) -> None:
    """Refuse a project file that sets a key only the user's own config may set.

    Checked on the unexpanded data, at ``agenthost trust`` and at every use, trusted or
    not: trust says "run these servers", never "let this repository change my security".

    Raises:
        ConfigError: the first such key (file, key path, and why).
    """
    for path, key, problem in _violations(project):
        raise ConfigError(f"{problem} (a user-only setting)", path=path, key=key)
