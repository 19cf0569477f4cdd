"""What :func:`~agenthost.host.open_host` reads from the config before any server starts:
the ``[providers]`` section, and the ``[policy]`` section when no engine is given."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from agenthost.config.model import HostConfig
from agenthost.host.catalog import SEPARATOR, tool_prefix
from agenthost_policies import PolicyEngine, Rule, parse_policy, unmatchable
from agenthost_policies.prompters import Prompter
from agenthost_providers.config import ProvidersConfig, parse_providers

__all__ = ["config_source", "read_sections", "warn_unmatchable"]

log = logging.getLogger("agenthost.host")


def read_sections(
    config: HostConfig, *, policy: PolicyEngine | None, prompter: Prompter | None
) -> tuple[ProvidersConfig, PolicyEngine]:
    """The providers' settings and the policy engine: ``policy`` when given, else one built
    from ``config.policy`` (audit file included), with ``prompter`` for its "ask" answers.

    Raises:
        ConfigError: the ``[policy]`` or ``[providers]`` section is invalid.
    """
    source, base_dir = config_source(config)
    providers_config = parse_providers(config.providers, source=source, base_dir=base_dir)
    if policy is not None:
        return providers_config, policy
    policy_config = parse_policy(config.policy, source=source, base_dir=base_dir)
    warn_unmatchable(policy_config.rules, config)
    return providers_config, PolicyEngine.from_config(policy_config, prompter=prompter)


def config_source(config: HostConfig) -> tuple[str, str | None]:
    """The config's file (for messages) and its directory (relative paths start there)."""
    if config.source is None:
        return "<config>", None
    return config.source, os.path.dirname(os.path.abspath(config.source))


def warn_unmatchable(rules: Sequence[Rule], config: HostConfig) -> None:
    """One warning line per rule that can match nothing (it names the rule and its file).

    Why: such a rule is accepted and then never fires, and nothing else would say so.
    Every configured server counts, enabled or not: a rule for a disabled server is fine.
    """
    servers = {s.name: tool_prefix(s.name) + SEPARATOR for s in config.servers}
    for rule in rules:
        why = unmatchable(rule, servers)
        if why is not None:
            where = rule.source or config_source(config)[0]
            log.warning("%s: policy rule %s can match nothing: %s", where, rule.label, why)
