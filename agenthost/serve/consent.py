"""Consent at the boundary: a rule's "ask" is put to the person behind the downstream client.

The gateway's policy engine is the CLI's (same rules, same audit file, same remembered
answers); only who answers an "ask" differs. A terminal is out of the question (stdin is
the protocol), so :class:`DownstreamPrompter` asks through the client instead, with an
``elicitation/create`` form: allow once / always / deny, showing the server, the tool
and the full arguments (the text the terminal prompter would show). A client that cannot
elicit (it did not declare the capability, or speaks a revision without it) leaves
nobody to ask: the answer is then the headless one (deny, decline, reject), and the
audit says so (``by: headless``). An upstream's own elicitation that the policy lets
through is forwarded to the client as it came.

Which client: :meth:`~agenthost.serve.gateway.Gateway.asker` says (the one whose request
is being served; for an upstream's ask that cannot be tied to one call, nobody on a shared
gateway: the headless answer); a 2026-07-28 client is asked through its pending request
(:mod:`agenthost.serve.mrtr`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import trio

from agenthost.errors import AgentHostError, JSONRPCError
from agenthost.protocol import methods as m
from agenthost.protocol.revisions import at_least
from agenthost.protocol.types import ElicitRequestParams
from agenthost.serve.mrtr import Asker
from agenthost_policies import Answer, Elicitation, ElicitationResponse, Sampling
from agenthost_policies.decision import DecidedBy
from agenthost_policies.prompters import ConsentRequest, render_action

__all__ = ["DownstreamPrompter"]

log = logging.getLogger("agenthost.serve")

#: How long a person has to answer a consent form before it counts as "deny".
ANSWER_TIMEOUT: Final = 300.0

_CHOICES: Final = {"allow once": Answer.ALLOW, "always": Answer.ALWAYS, "deny": Answer.DENY}
_DECISION_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "decision": {
            "type": "string",
            "title": "Decision",
            "enum": list(_CHOICES),
            "description": "allow once, always allow this tool, or deny",
        }
    },
    "required": ["decision"],
}
_REVIEW_SCHEMA: Final = {
    "type": "object",
    "properties": {"send": {"type": "boolean", "title": "Send this answer to the server?"}},
    "required": ["send"],
}


class DownstreamPrompter:
    """Answers the policy's "ask" through the downstream client's elicitation.

    Args:
        pick: the client to ask (:meth:`Gateway.asker`; None: nobody).
        timeout: seconds a person has to answer; then the answer is "no".
    """

    def __init__(
        self,
        pick: Callable[[], Asker | None],
        *,
        timeout: float = ANSWER_TIMEOUT,
    ) -> None:
        self._pick = pick
        self._timeout = timeout

    def _client(self) -> Asker | None:
        session = self._pick()
        if session is None or session.closed or not session.can("elicitation"):
            return None
        revision = session.revision
        if revision is None or not at_least(revision, m.ELICITATION_CREATE_SPEC.since):
            return None
        return session

    @property
    def decided_by(self) -> DecidedBy:
        """``user`` when a person can answer through the client, else ``headless``."""
        return "user" if self._client() is not None else "headless"

    async def _form(self, message: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The accepted form's content, or None (declined, cancelled, unanswered, gone)."""
        client = self._client()
        if client is None:
            return None
        params = ElicitRequestParams(message=message, requested_schema=schema)
        try:
            with trio.move_on_after(self._timeout):
                result = await client.ask(m.ELICITATION_CREATE_SPEC, params, timeout=None)
                if result.action == "accept" and result.content is not None:
                    return dict(result.content)
        except (JSONRPCError, AgentHostError) as exc:
            log.warning("%s: consent form not answered: %s", client.name, exc)
        return None

    async def confirm(self, request: ConsentRequest) -> Answer:
        text = "agenthost: allow this?\n" + render_action(request)
        content = await self._form(text, _DECISION_SCHEMA)
        if content is None:
            return Answer.DENY
        return _CHOICES.get(str(content.get("decision")), Answer.DENY)

    async def review(self, action: Sampling, answer: str) -> bool:
        text = f"agenthost: the model answered {action.server}'s sampling request:\n{answer[:4000]}"
        content = await self._form(text, _REVIEW_SCHEMA)
        return content is not None and content.get("send") is True

    async def elicit(self, action: Elicitation) -> ElicitationResponse:
        """Forward an upstream's elicitation to the client, as the upstream sent it."""
        client = self._client()
        if client is None:
            return ElicitationResponse(action="decline")
        url_mode = action.mode == "url"
        assert client.revision is not None
        if url_mode and not at_least(client.revision, "2025-11-25"):
            return ElicitationResponse(action="decline")
        params = ElicitRequestParams(
            message=action.message,
            mode="url" if url_mode else None,
            requested_schema=None if url_mode else dict(action.requested_schema or {}),
            url=action.url if url_mode else None,
            elicitation_id=action.elicitation_id if url_mode else None,
        )
        response = ElicitationResponse(action="cancel")
        try:
            with trio.move_on_after(self._timeout):
                result = await client.ask(m.ELICITATION_CREATE_SPEC, params, timeout=None)
                response = ElicitationResponse(action=result.action, content=result.content)
        except (JSONRPCError, AgentHostError) as exc:
            log.warning("%s: elicitation not answered: %s", client.name, exc)
        return response
