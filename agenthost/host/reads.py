"""Prompts, resources and skills fetched for a user, each with consent and an audit line.

Plain functions over what each read needs (the policy, the server's supervisor and
config): :class:`~agenthost.host.Host` picks the server and calls them. Every read is a
retrieval, so a 2026-07-28 server that needs the initialize era gets the same read again
there (:func:`~agenthost.host.era_fallback.with_era_fallback`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from agenthost.config.model import ServerConfig
from agenthost.errors import AgentHostError, AmbiguousResource, NotFound, server_data
from agenthost.host.catalog import Catalog
from agenthost.host.era_fallback import with_era_fallback
from agenthost.host.supervisor import ServerState, Supervisor
from agenthost.protocol.types import GetPromptResult, ReadResourceResult
from agenthost.skills import LoadedSkill, SkillEntry, list_skills, load_skill, offers_skills
from agenthost_policies import PolicyEngine, PromptGet, ResourceRead, SkillLoad

__all__ = [
    "get_prompt",
    "list_server_skills",
    "load_listed_skill",
    "read_resource",
    "resource_owner",
]

log = logging.getLogger("agenthost.host")


async def get_prompt(
    policy: PolicyEngine,
    supervisor: Supervisor,
    config: ServerConfig,
    name: str,
    arguments: Mapping[str, str] | None,
) -> GetPromptResult:
    """Fetch prompt ``name`` from the server of ``supervisor``, with consent (``prompt``)."""
    session = supervisor.require_session()
    action = PromptGet(
        server=supervisor.name,
        prompt=name,
        arguments=dict(arguments or {}),
        trusted=config.trusted,
    )
    async with policy.guard(action) as outcome:
        result = await with_era_fallback(
            supervisor,
            session,
            f"prompt {name}",
            lambda on: on.get_prompt(name, arguments),
            repeatable=True,
        )
        outcome.result = {"messages": len(result.messages)}
    return result


def resource_owner(catalog: Catalog, uri: str) -> str:
    """The one server that serves ``uri`` (see :meth:`Catalog.resource_owners`).

    Raises:
        NotFound: no server lists or templates ``uri``.
        AmbiguousResource: several servers could serve it equally well.
    """
    owners = catalog.resource_owners(uri)
    if len(owners) > 1:
        raise AmbiguousResource(
            f"several servers could serve resource {uri!r} ({', '.join(owners)});"
            " name one with --server",
            uri=uri,
            servers=owners,
        )
    if not owners:
        raise NotFound(f"no server lists resource {uri!r}; name the server")
    return owners[0]


async def read_resource(
    policy: PolicyEngine, supervisor: Supervisor, config: ServerConfig, uri: str
) -> ReadResourceResult:
    """Read ``uri`` from the server of ``supervisor``, with consent (kind ``resource``)."""
    session = supervisor.require_session()
    action = ResourceRead(server=supervisor.name, uri=uri, trusted=config.trusted)
    async with policy.guard(action) as outcome:
        result = await with_era_fallback(
            supervisor, session, "resources/read", lambda on: on.read_resource(uri), repeatable=True
        )
        outcome.result = {"contents": len(result.contents)}
    return result


async def list_server_skills(
    supervisors: Sequence[Supervisor], *, named: bool
) -> list[tuple[str, SkillEntry]]:
    """The skills of ``supervisors``' servers that offer the skills extension.

    ``named``: the caller named the one server, so its problems are raised; otherwise
    servers not ready or without skills are skipped, and a failed listing is logged.
    """
    found: list[tuple[str, SkillEntry]] = []
    for sup in supervisors:
        name = sup.name
        if not named and sup.state is not ServerState.READY:
            continue
        session = sup.require_session()
        if not offers_skills(session.server_capabilities):
            if named:
                raise NotFound(f"server {name!r} does not offer skills")
            continue
        try:
            with server_data(name, "skills/list"):
                found.extend((name, entry) for entry in await list_skills(session))
        except AgentHostError as exc:
            if named:
                raise
            log.warning("%s: cannot list skills: %s", name, exc)
    return found


async def load_listed_skill(
    policy: PolicyEngine, supervisor: Supervisor, config: ServerConfig, entry: SkillEntry
) -> LoadedSkill:
    """Load the skill ``entry`` lists, with consent (kind ``skill``), verified against it."""
    session = supervisor.require_session()
    action = SkillLoad(
        server=supervisor.name,
        skill=entry.name,
        uri=entry.uri,
        description=entry.description,
        trusted=config.trusted,
    )
    async with policy.guard(action) as outcome:
        with server_data(supervisor.name, f"skill {entry.name}"):
            loaded = await load_skill(session, entry)
        outcome.result = {"bytes": len(loaded.text)}
    return loaded
