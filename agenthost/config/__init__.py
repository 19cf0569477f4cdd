"""Configuration: the model (``model``), the file loaders (``loader``), ``${VAR}``
expansion (``expand``) and the trust of project files (``trust``).

The model imports nothing from the loaders; this package re-exports the model's public names."""

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
    "find_config",
    "find_project_config",
    "user_config_path",
]
