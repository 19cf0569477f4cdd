"""Configuration: the model (``model``), the file loaders (``loader``), ``${VAR}``
expansion (``expand``) and the trust of project files (``trust``).

The model imports nothing from the loaders (the loaders build the model, so a model method
that called back into them was an import circle); this package re-exports the model's public
names and the three ways to load one: :func:`load_config` (a file), :func:`config_from_mapping`
(a TOML-shaped mapping) and :func:`load_scoped` (the user's file plus a trusted project's)."""

from agenthost.config.loader import config_from_mapping, load_config
from agenthost.config.model import (
    PROJECT_CONFIGS,
    PROTOCOLS,
    PROXY_ENV_VARS,
    REDACTED,
    TRANSPORTS,
    HostConfig,
    RestartPolicy,
    ServerConfig,
    Timeouts,
    TransportKind,
    Workspace,
    find_config,
    find_project_config,
    user_config_path,
)
from agenthost.config.scope import load_scoped

__all__ = [
    "PROJECT_CONFIGS",
    "PROTOCOLS",
    "PROXY_ENV_VARS",
    "REDACTED",
    "TRANSPORTS",
    "HostConfig",
    "RestartPolicy",
    "ServerConfig",
    "Timeouts",
    "TransportKind",
    "Workspace",
    "config_from_mapping",
    "find_config",
    "find_project_config",
    "load_config",
    "load_scoped",
    "user_config_path",
]
