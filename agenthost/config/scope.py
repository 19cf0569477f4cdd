"""Configuration scopes: the user's own config, and a project config the user trusted.

The user's config (``$XDG_CONFIG_HOME/agenthost/agenthost.toml``, or a file named with
``--config``) is the user's word. A project config (discovered in the current directory)
is someone else's until the user trusts its exact bytes (:mod:`agenthost.config.trust`); then it
*adds* servers, workspaces inside the project, and rules that deny or ask, and the user's
settings win wherever both set one. :func:`load_scoped` is the one place that rule lives:
it is given the digest the user trusted and loads nothing that does not still have it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from agenthost.config.loader import load_config
from agenthost.config.model import HostConfig
from agenthost.config.trust import ProjectFile, inspect_project
from agenthost.config.user_only import check_user_only
from agenthost.errors import UntrustedConfig

__all__ = ["combine", "load_scoped"]

log = logging.getLogger("agenthost.config")


def load_scoped(
    *,
    user: str | os.PathLike[str] | None,
    project: str | os.PathLike[str] | None,
    trusted_digest: str | None,
    env: Mapping[str, str] | None = None,
    default_workspace: bool = False,
) -> HostConfig:
    """The user's config combined with the project's, if the user trusted the project's bytes.

    Args:
        user: the user-scope file, or None.
        project: the discovered project file, or None.
        trusted_digest: the :attr:`~agenthost.config.trust.ProjectFile.digest` the user trusted
            (recorded, or for this run only); ``None`` means the project is not trusted.
        env: for ``${VAR}`` expansion (only ever of a trusted file); ``os.environ``
            by default.
        default_workspace: with no workspace configured, expose the current directory.

    Raises:
        UntrustedConfig: a project file whose digest is not ``trusted_digest`` (nothing of
            it was expanded, started or contacted).
        ConfigError: any problem in either file, or a user-only key in the project file.
    """
    if env is None:
        env = os.environ
    if project is None:
        if user is None:
            raise ValueError("load_scoped needs a user or a project file")
        return load_config(user, env=env, default_workspace=default_workspace)
    user_config = None
    if user is not None:
        user_config = load_config(user, env=env, default_workspace=False)
    before = inspect_project(project)
    check_user_only(before)
    if trusted_digest is None or before.digest != trusted_digest:
        raise UntrustedConfig(
            "this project's config is not trusted, so nothing in it was loaded",
            path=str(project),
        )
    # With no workspace of the user's, the project's default (its folder) applies.
    project_default = default_workspace and not (user_config and user_config.workspaces)
    # From the bytes that were digested, never the disk again: a file swapped in between
    # the check and the load (and back) cannot be what runs.
    project_config = load_config(
        project, env=env, default_workspace=project_default, contents=before.contents
    )
    return combine(user_config, project_config, before)


def _absolute(value: Any, base: Path) -> Any:
    """A path (or ``{path = ...}`` table) made absolute against the project's file: the
    combined config's relative paths are the user's file's."""
    if isinstance(value, str):
        raw = os.path.expanduser(value)
        return raw if os.path.isabs(raw) else str(base / raw)
    if isinstance(value, Mapping) and isinstance(value.get("path"), str):
        return {**value, "path": _absolute(value["path"], base)}
    return value


def combine(user: HostConfig | None, project: HostConfig, file: ProjectFile) -> HostConfig:
    """The project's config added to the user's: the user's settings win where both set one.

    Project servers carry ``scope = "project:<resolved path>"``; a project server whose
    name the user's config already uses is dropped (with a warning).
    """
    scope = f"project:{file.path}"
    project_servers = [attrs.evolve(s, scope=scope) for s in project.servers]
    project_policy = dict(project.policy)
    for key in ("audit", "approvals"):
        if key in project_policy:
            project_policy[key] = _absolute(project_policy[key], file.path.parent)
    providers = {
        name: (
            {**entry, "script": _absolute(entry["script"], file.path.parent)}
            if isinstance(entry, Mapping) and isinstance(entry.get("script"), str)
            else entry
        )
        for name, entry in project.providers.items()
    }
    project_rules = project_policy.pop("rules", [])
    if project_rules:
        # Consulted after the user's rules and preset, and only where stricter
        # (policies.engine): a project adds caution, never removes any.
        project_policy["project"] = {"file": str(file.path), "rules": project_rules}
    if user is None:
        return attrs.evolve(
            project, servers=project_servers, policy=project_policy, providers=providers
        )
    names = {s.name for s in user.servers}
    for s in project_servers:
        if s.name in names:
            log.warning(
                "%s: server %r is also in your config %s; yours is used",
                file.path,
                s.name,
                user.source,
            )
    servers = [*user.servers, *(s for s in project_servers if s.name not in names)]
    paths = {w.path for w in user.workspaces}
    workspaces = [*user.workspaces, *(w for w in project.workspaces if w.path not in paths)]
    providers = {**providers, **user.providers}
    policy = dict(user.policy)
    for key, value in project_policy.items():
        policy.setdefault(key, value)
    return attrs.evolve(
        user, servers=servers, workspaces=workspaces, providers=providers, policy=policy
    )
