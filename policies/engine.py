"""The policy engine: one place that decides every action, asks when it must, and records.

Evaluation of :meth:`PolicyEngine.check` (also in ``POLICY.md``):

1. The user's rules, in order, then the preset's rules: the **first match wins**.
2. No rule matches: the mode's default - ``ask`` (interactive, programmatic) or ``deny``
   (headless).
3. Sampling that is not denied: the matched rule's limits (includeContext, providers,
   models, requests per minute, token budget) are checked *before* anyone is asked, and
   the request is counted against the rate and its tokens held right then, so concurrent
   requests see each other and nobody approves what a limit would refuse anyway; a hit is
   a deny (``by="limit"``).
4. ``ask``: a remembered choice ("always"/"never" for the same kind, server and name, from
   this session or, for tools, the approvals file) answers it; otherwise the prompter
   does - a human at the terminal, the application's callback, or, in headless mode, the
   stand-in that says no. With no terminal to ask on (stdin a pipe), the ask is denied
   as that (``by="no-terminal"``), not as the user's answer. An "always" for a tool is
   bound to the tool's definition and to where its server runs (command, working
   directory, environment, config scope): when either changed, the prompter is asked
   again and told what changed. Remembered choices only ever answer an "ask": they never
   override a rule's allow or deny.
5. Sampling that is not allowed in the end gives its rate slot and tokens back; an
   allowed one keeps them until the sampling service settles it with the provider's
   reported usage (:meth:`PolicyEngine.settle_sampling`).

The result is always allow or deny, never ask, and each one is written to the audit log
(one ``decision`` line) before it is returned. Allowed actions get one ``outcome`` line
when the caller reports how they went (:meth:`PolicyEngine.record_outcome`, or
:meth:`PolicyEngine.guard` which does both).

Elicitation is answered whole by :meth:`PolicyEngine.elicit` (consent and the form are one
interaction), and the generated answer of a sampling request is reviewed by
:meth:`PolicyEngine.review_sampling`.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Hashable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from agenthost.errors import ConsentDenied, InvalidAnswer, JSONRPCError
from agenthost_policies.approvals import Approval, ApprovalStore
from agenthost_policies.audit import AuditLog, redact
from agenthost_policies.config import Mode, PolicyConfig
from agenthost_policies.decision import (
    Action,
    Answer,
    DecidedBy,
    Decision,
    Elicitation,
    ElicitationResponse,
    PromptGet,
    ResourceRead,
    RootsExposure,
    Sampling,
    SamplingGrant,
    SkillLoad,
    ToolCall,
    Verdict,
)
from agenthost_policies.elicitation import inspect_url, parse_form, validate_content, with_defaults
from agenthost_policies.limits import Clock, SamplingLimiter
from agenthost_policies.prompters import (
    ConsentRequest,
    HeadlessPrompter,
    Prompter,
    TerminalPrompter,
)
from agenthost_policies.rules import Rule, SamplingLimits, first_match, rule_view

__all__ = ["Outcome", "PolicyEngine"]

log = logging.getLogger(__name__)

_NO_LIMITS = SamplingLimits()


@attrs.define
class Outcome:
    """Filled in by the body of :meth:`PolicyEngine.guard`: what the action returned."""

    decision: Decision
    #: A summary of the result for the audit (redacted and truncated when written).
    result: Any = None


def _cancelled_text(exc: trio.Cancelled) -> str:
    """How a cancelled action reads in the audit: why, in words (the canceller's reason,
    e.g. "cancelled by the user"), never trio's text with a task's repr in it."""
    if exc.reason:
        return exc.reason
    if exc.source == "deadline":
        return "cancelled: its time limit passed"
    return "cancelled"


def _arguments(action: Action) -> Any:
    """The part of an action the audit line summarises under ``args``."""
    if isinstance(action, ToolCall | PromptGet):
        return dict(action.arguments)
    if isinstance(action, ResourceRead | SkillLoad):
        return {"uri": action.uri}
    if isinstance(action, RootsExposure):
        return {"roots": list(action.roots)}
    if isinstance(action, Sampling):
        summary = {
            "messages": len(action.messages),
            "max_tokens": action.max_tokens,
            "include_context": action.include_context,
            "provider": action.provider,
            "model": action.model,
            "tools": list(action.tools),
        }
        if action.model_reason is not None:
            # Why this model (or this destination): the line explains the choice.
            summary["model_reason"] = action.model_reason
        return summary
    return {"mode": action.mode, "message": action.message, "url": action.url}


def _check_elicitation(action: Elicitation) -> None:
    """Raise -32602 for a request no prompter may be shown (see :meth:`PolicyEngine.elicit`)."""
    if action.mode == "url":
        if not action.url:
            raise JSONRPCError(-32602, "url mode needs a url")
        inspect_url(action.url)
    else:
        parse_form(action.requested_schema)


def _binding(action: ToolCall) -> str | None:
    """Where the tool's server runs, to find the answer given for that place."""
    return action.definition.binding if action.definition is not None else None


def _no_terminal(what: str) -> str:
    """The reason for a deny because nobody could be asked: said as that, with the way out."""
    return (
        f"no terminal to ask: denied ({what}); add a rule that allows it, or use"
        " --policy FILE with rules for runs without a terminal"
    )


def _memory_key(action: Action) -> Hashable:
    if isinstance(action, RootsExposure):
        return (action.kind, action.server, action.roots)
    return (action.kind, action.server, action.name)


class PolicyEngine:
    """Decides, asks, remembers, limits and records every consent-relevant action.

    Args:
        rules: all rules in evaluation order (``PolicyConfig.all_rules``).
        project_rules: a trusted project's rules (``PolicyConfig.project_rules``): each
            only ever makes a decision stricter (see :meth:`_rule_view`).
        mode: ``interactive``, ``headless`` or ``programmatic``; decides the default for
            actions no rule matches and who answers an "ask".
        prompter: who answers an "ask". Interactive: a :class:`TerminalPrompter` on
            stdin/stderr unless given; programmatic: required (a
            :class:`~agenthost_policies.prompters.CallbackPrompter`); headless: always the
            :class:`HeadlessPrompter` - a headless engine cannot be given a human.
        audit: the audit log, or ``None`` for none. The engine does not close a log it
            was given; :meth:`from_config` opens one the engine owns.
        clock: monotonic seconds, for rate windows and durations (inject for tests).
        approvals: where "always"/"never" answers for tools are kept across sessions;
            ``None``: for this engine's life only.

    **Concurrency:** safe for many Trio tasks at once; prompts are serialised by the
    prompter, limit checks are synchronous.
    """

    def __init__(
        self,
        *,
        rules: Sequence[Rule],
        mode: Mode = "interactive",
        prompter: Prompter | None = None,
        audit: AuditLog | None = None,
        clock: Clock = time.monotonic,
        approvals: ApprovalStore | None = None,
        project_rules: Sequence[Rule] = (),
    ) -> None:
        if mode == "headless":
            if prompter is not None and not isinstance(prompter, HeadlessPrompter):
                raise ValueError("a headless engine asks nobody; do not pass a prompter")
            prompter = HeadlessPrompter()
        elif mode == "programmatic" and prompter is None:
            raise ValueError("programmatic mode needs a prompter (e.g. a CallbackPrompter)")
        elif prompter is None:
            prompter = TerminalPrompter()
        self.mode: Mode = mode
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.project_rules: tuple[Rule, ...] = tuple(project_rules)
        self.prompter: Prompter = prompter
        self.limiter = SamplingLimiter(clock=clock)
        self._audit = audit
        self._owns_audit = False
        self._clock = clock
        self._default = Verdict.DENY if mode == "headless" else Verdict.ASK
        self._memory: dict[Hashable, Approval] = {}
        self._approvals = approvals
        self._pending: dict[str, Action] = {}
        self._ids = itertools.count(1)
        self._prefix = os.urandom(4).hex()

    @classmethod
    def from_config(
        cls,
        config: PolicyConfig,
        *,
        prompter: Prompter | None = None,
        clock: Clock = time.monotonic,
    ) -> PolicyEngine:
        """An engine for a parsed ``[policy]`` section, opening its audit file.

        **Resource handling:** call :meth:`close` (or use ``with``) to close the audit file.
        """
        if prompter is None and config.mode == "interactive":
            prompter = TerminalPrompter(timeout=config.prompt_timeout)
        audit = None
        if config.audit is not None:
            audit = AuditLog(
                config.audit.path, fsync=config.audit.fsync, fold_window=config.audit.fold
            )
        approvals = ApprovalStore(config.approvals) if config.approvals is not None else None
        engine = cls(
            rules=config.all_rules,
            project_rules=config.project_rules,
            mode=config.mode,
            prompter=prompter,
            audit=audit,
            clock=clock,
            approvals=approvals,
        )
        engine._owns_audit = audit is not None
        return engine

    def __enter__(self) -> PolicyEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the audit log if this engine opened it (writing its pending counts)."""
        if self._audit is not None and self._owns_audit:
            self._audit.close()

    async def run_audit_flusher(self) -> None:
        """Write the counts of folded audit lines as they fall due, until cancelled.

        Why: a count held in memory is lost by a crash, and a flood that stops would
        otherwise have its ``suppressed`` count written only with the subject's next line
        or at close. Ticking every ``count_every / 4`` seconds writes each count within
        ``count_every`` of its first repeat. The host runs this in its nursery.

        **Cancellation:** the only way it ends; nothing is left half-written.
        """
        audit = self._audit
        if audit is None or audit.fold_window <= 0:
            await trio.sleep_forever()
        while True:
            await trio.sleep(audit.count_every / 4)
            if audit.closed:
                await trio.sleep_forever()
            audit.flush(due_only=True)

    # -- deciding -----------------------------------------------------------------------

    def match(self, action: Action) -> Rule | None:
        """The rule that decides ``action`` (first match), without asking or recording."""
        return first_match(self.rules, action)

    def always_denies(self, action: Action) -> str | None:
        """Why ``action`` can only end denied, or None when it may be allowed.

        Rules match on kind, server, name, trust and annotations, never on arguments, so
        this holds for every call of a tool: a deny rule, a remembered "never", or an "ask"
        that nobody can answer (headless). The agent uses it to leave such tools out of
        what the model is offered. Nothing is asked or recorded.
        """
        _, verdict, label, reason, _ = self._rule_view(action)
        if verdict is Verdict.DENY:
            return f"{label}: {reason}"
        if verdict is Verdict.ASK:
            remembered = self._memory.get(_memory_key(action))
            if remembered is None and self._approvals is not None and isinstance(action, ToolCall):
                # What the file held at its last reading: no I/O here (a "never" not yet
                # seen is still refused when the call is decided).
                remembered = self._approvals.cached(
                    action.kind.value, action.server, action.tool, binding=_binding(action)
                )
            if remembered is not None and remembered.decision == "deny":
                return f"you answered 'never' ({reason})"
            who = self.prompter.decided_by
            if who == "headless":
                return f"{label} says ask and nobody can answer (headless): {reason}"
            if who == "no-terminal":
                return _no_terminal(f"{label} says ask: {reason}")
        return None

    def _new_id(self) -> str:
        return f"{self._prefix}-{next(self._ids)}"

    def _rule_view(self, action: Action) -> tuple[Rule | None, Verdict, str, str, DecidedBy]:
        """The deciding rule (None: the mode's default), verdict, label, reason and who
        (:func:`~agenthost_policies.rules.rule_view`)."""
        view = rule_view(
            self.rules, self.project_rules, mode=self.mode, default=self._default, action=action
        )
        return view.rule, view.verdict, view.label, view.reason, view.by

    async def check(self, action: Action) -> Decision:
        """Decide one action: allow or deny (an "ask" is resolved here), and record it.

        Returns:
            The decision. Allowed decisions wait for :meth:`record_outcome`; an allowed
            sampling decision also holds rate and budget until :meth:`settle_sampling`
            (or :meth:`release_sampling`).

        **Cancellation:** cancelling while a human is being asked records a deny
        ("cancelled before an answer") and propagates the cancellation.
        """
        if isinstance(action, Elicitation):
            raise TypeError("elicitations are answered whole by PolicyEngine.elicit()")
        decision_id = self._new_id()
        try:
            decision = await self._decide(action, decision_id)
        except BaseException:
            self._write_now(
                action,
                Decision(
                    id=decision_id,
                    verdict=Verdict.DENY,
                    rule="cancelled",
                    reason="cancelled or failed before a decision was made",
                    by="default",
                ),
            )
            raise
        try:
            await self._write_decision(action, decision)
        except BaseException:
            if decision.sampling is not None:
                self.limiter.release(decision.sampling)
            raise
        if decision.allowed:
            self._pending[decision.id] = action
        return decision

    async def _decide(self, action: Action, decision_id: str) -> Decision:
        rule, verdict, label, reason, by = self._rule_view(action)
        grant: SamplingGrant | None = None
        if isinstance(action, Sampling) and verdict is not Verdict.DENY:
            limits = _NO_LIMITS
            if rule is not None and rule.sampling is not None:
                limits = rule.sampling
            try:
                # Counted and held now, before anyone is asked: concurrent requests each
                # see the others, so no human approves what a limit must refuse.
                grant = self.limiter.reserve(action, limits, rule=label)
            except ConsentDenied as exc:
                return Decision(
                    id=decision_id, verdict=Verdict.DENY, rule=label, reason=str(exc), by="limit"
                )
        if verdict is Verdict.ASK:
            try:
                verdict, reason, by = await self._ask(action, label, reason, grant)
            except BaseException:
                if grant is not None:
                    self.limiter.release(grant)
                raise
        if grant is not None and verdict is not Verdict.ALLOW:
            self.limiter.release(grant)  # refused: the request costs no rate or budget
        return Decision(
            id=decision_id,
            verdict=verdict,
            rule=label,
            reason=reason,
            by=by,
            sampling=grant if verdict is Verdict.ALLOW else None,
        )

    async def _recall(self, action: Action) -> tuple[Approval | None, DecidedBy]:
        """The remembered answer for ``action``: the approvals file first (tools), then
        this session's memory."""
        if self._approvals is not None and isinstance(action, ToolCall):
            store = self._approvals
            try:
                stored = await trio.to_thread.run_sync(
                    functools.partial(
                        store.get,
                        action.kind.value,
                        action.server,
                        action.tool,
                        binding=_binding(action),
                    )
                )
            except OSError as exc:
                log.warning("approvals file %s: %s", store.path, exc)
            else:
                if stored is not None:
                    return stored, "stored"
        return self._memory.get(_memory_key(action)), "session"

    async def _remember(self, action: Action, answer: Answer) -> None:
        approval = Approval.answer(
            kind=action.kind.value,
            server=action.server,
            name=action.name,
            allow=answer is Answer.ALWAYS,
            definition=action.definition if isinstance(action, ToolCall) else None,
        )
        if self._approvals is not None and isinstance(action, ToolCall):
            store = self._approvals
            try:
                await trio.to_thread.run_sync(store.put, approval)
            except OSError as exc:
                log.warning("approvals file %s: %s; kept for this session only", store.path, exc)
            else:
                self._memory.pop(_memory_key(action), None)
                return
        self._memory[_memory_key(action)] = approval

    async def _ask(
        self, action: Action, label: str, reason: str, grant: SamplingGrant | None
    ) -> tuple[Verdict, str, DecidedBy]:
        remembered, where = await self._recall(action)
        changes: tuple[str, ...] = ()
        if remembered is not None:
            definition = action.definition if isinstance(action, ToolCall) else None
            if remembered.decision == "allow" and definition is not None:
                changes = definition.changes_since(remembered)
            if not changes:
                verdict = Verdict.ALLOW if remembered.decision == "allow" else Verdict.DENY
                word = "always" if verdict is Verdict.ALLOW else "never"
                since = "for this session" if where == "session" else f"on {remembered.at}"
                return verdict, f"remembered '{word}' {since} ({reason})", where
        shown = reason
        if changes:
            reason = f"the tool changed since 'always' ({'; '.join(changes)}); {reason}"
        who = self.prompter.decided_by
        if who == "no-terminal":
            # Nobody was asked, so nobody answered: never recorded as the user's "no".
            return Verdict.DENY, _no_terminal(f"{label} says ask: {reason}"), who
        answer = await self.prompter.confirm(
            ConsentRequest(action=action, rule=label, reason=shown, grant=grant, changes=changes)
        )
        if answer in (Answer.ALWAYS, Answer.NEVER):
            await self._remember(action, answer)
        verdict = Verdict.ALLOW if answer in (Answer.ALLOW, Answer.ALWAYS) else Verdict.DENY
        if who == "headless":
            return (
                verdict,
                f"headless mode: nobody to ask, and no rule allows it ({label} says ask: "
                f"{reason}); add an allow rule to permit it",
                who,
            )
        return verdict, f"{who} answered {answer.value} ({reason})", who

    async def require(self, action: Action) -> Decision:
        """:meth:`check`, raising when denied.

        Raises:
            ConsentDenied: with the decision's reason and rule.
        """
        decision = await self.check(action)
        if not decision.allowed:
            raise ConsentDenied(decision.reason, rule=decision.rule)
        return decision

    # -- outcomes -----------------------------------------------------------------------

    async def record_outcome(
        self,
        decision_id: str,
        *,
        result: Any = None,
        error: BaseException | str | None = None,
        duration: float | None = None,
    ) -> None:
        """Write the outcome line of an allowed action.

        Args:
            decision_id: the :attr:`Decision.id` of the allowed action.
            result: a summary of what it returned (redacted and truncated in the log).
            error: the exception or message if it failed.
            duration: seconds it ran.

        Raises:
            KeyError: the id is unknown, was denied, or its outcome was already recorded.
        """
        action = self._pending.pop(decision_id)
        if self._audit is not None:
            await self._audit.write(
                self._outcome_record(decision_id, action, result, error, duration)
            )

    def _outcome_record(
        self,
        decision_id: str,
        action: Action,
        result: Any,
        error: BaseException | str | None,
        duration: float | None,
    ) -> dict[str, Any]:
        if isinstance(error, trio.Cancelled):
            error = _cancelled_text(error)
        elif isinstance(error, BaseException):
            error = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        return {
            "event": "outcome",
            "id": decision_id,
            "kind": action.kind.value,
            "server": action.server,
            "name": action.name,
            "duration": None if duration is None else round(duration, 6),
            "result": redact(result),
            "error": redact(error),
        }

    @asynccontextmanager
    async def guard(self, action: Action) -> AsyncIterator[Outcome]:
        """Check ``action``, run the body only if allowed, and record how it went.

        ::

            async with engine.guard(ToolCall(server="fs", tool="write", arguments=a)) as out:
                out.result = await session.call_tool("write", a)

        Raises:
            ConsentDenied: before the body runs, when denied.

        **Error handling:** an exception (or cancellation) in the body is recorded as the
        outcome's error and re-raised.
        """
        decision = await self.require(action)
        outcome = Outcome(decision)
        start = self._clock()
        try:
            yield outcome
        except BaseException as exc:
            # Possibly cancelled: no await here, the line is written synchronously.
            self._pending.pop(decision.id, None)
            if self._audit is not None:
                record = self._outcome_record(decision.id, action, None, exc, self._clock() - start)
                self._audit.write_now(record)
            raise
        await self.record_outcome(
            decision.id, result=outcome.result, duration=self._clock() - start
        )

    # -- sampling -----------------------------------------------------------------------

    async def review_sampling(
        self, action: Sampling, answer: str, *, decision: Decision | None = None
    ) -> bool:
        """Whether the model's answer may go back to the server.

        Approved without asking when the rule says ``review = "auto"``; otherwise the
        prompter decides (headless: rejected). Written to the audit as a ``review`` line.

        Args:
            action: the sampling request that was allowed.
            answer: the generated text (and a rendering of any tool calls) to show.
            decision: the allow decision from :meth:`check`, to link the audit lines.
        """
        if decision is not None and decision.sampling is not None:
            auto, label = decision.sampling.auto_review, decision.rule
        else:
            rule, _, label, _, _ = self._rule_view(action)
            auto = rule is not None and rule.sampling is not None and rule.sampling.auto_review
        by: DecidedBy
        if auto:
            approved, by, reason = True, "rule", f"rule {label} sets review = 'auto'"
        else:
            by = self.prompter.decided_by
            approved = await self.prompter.review(action, answer)
            if by == "headless":
                reason = (
                    f"headless mode: nobody to review, and rule {label} does not set "
                    "review = 'auto'"
                )
            elif by == "no-terminal":
                reason = _no_terminal(f"review of the answer; rule {label} does not set auto")
            else:
                reason = f"{by} {'approved' if approved else 'rejected'} the answer"
        if self._audit is not None:
            await self._audit.write(
                {
                    "event": "review",
                    "id": decision.id if decision is not None else self._new_id(),
                    "kind": action.kind.value,
                    "server": action.server,
                    "name": action.model or "",
                    "args": redact({"answer": answer}),
                    "decision": "allow" if approved else "deny",
                    "rule": label,
                    "reason": reason,
                    "by": by,
                }
            )
        return approved

    def settle_sampling(self, decision: Decision, tokens: int | None) -> None:
        """End an allowed sampling request's reservation with the tokens it used.

        Args:
            decision: the allow decision from :meth:`check`.
            tokens: input + output tokens the provider reported; ``None`` when unknown
                (cancelled mid-call): the whole reservation counts.

        Idempotent; a no-op for decisions without a reservation.
        """
        if decision.sampling is not None:
            self.limiter.settle(decision.sampling, tokens)

    def release_sampling(self, decision: Decision) -> None:
        """Give back an allowed sampling request's rate slot and tokens: it was never sent
        (the provider refused it before any work). Idempotent."""
        if decision.sampling is not None:
            self.limiter.release(decision.sampling)

    def record_sampling_usage(self, server: str, tokens: int) -> None:
        """Count tokens (input + output) against the budget outside any reservation."""
        self.limiter.record_usage(server, tokens)

    # -- elicitation --------------------------------------------------------------------

    async def elicit(self, action: Elicitation) -> ElicitationResponse:
        """Answer an ``elicitation/create`` request, start to finish.

        * a deny rule: declined without asking;
        * an allow rule with canned ``answers`` (form mode): those answers, the server's
          defaults for the fields they leave out, validated against the requested schema
          (invalid ones are declined, never sent);
        * otherwise the prompter: the user fills in the form or consents to open the URL;
          headless: declined. URL mode always needs a human: never accepted headless.
          An answer from the prompter that does not fit the form (``InvalidAnswer``) is
          not sent: the server gets ``cancel``.

        One ``decision`` line and, unless declined by policy, one ``outcome`` line with the
        response (content redacted).

        Raises:
            JSONRPCError: -32602 when the server's schema or URL is invalid: a form schema
                outside the spec's subset or with a pattern RE2 cannot run, a URL that is
                not ``https`` (``http`` only for loopback). Checked before anything else,
                so no prompter or callback ever sees such a request.
        """
        rule, verdict, label, reason, by = self._rule_view(action)
        decision_id = self._new_id()
        try:
            # What the server sent is checked before any rule, memory or prompter sees it:
            # no callback ever gets a javascript: URL or a schema it cannot check safely.
            _check_elicitation(action)
        except JSONRPCError as exc:
            self._write_now(
                action,
                Decision(id=decision_id, verdict=Verdict.DENY, rule=label, reason=str(exc)),
            )
            raise
        response: ElicitationResponse | None = None
        if verdict is Verdict.DENY:
            pass
        elif action.mode == "url" and self.prompter.decided_by == "headless":
            verdict, by = Verdict.DENY, "headless"
            reason = "headless mode: a URL elicitation needs a human to consent and open it"
        elif action.mode == "url" and self.prompter.decided_by == "no-terminal":
            verdict, by = Verdict.DENY, "no-terminal"
            reason = _no_terminal("a URL elicitation needs a human to consent and open it")
        elif action.mode == "form" and rule is not None and rule.answers is not None:
            verdict = Verdict.ALLOW
            try:
                schema = action.requested_schema or {}
                content = await validate_content(
                    schema, with_defaults(schema, rule.answers), server=action.server
                )
            except JSONRPCError as exc:
                # The server's schema is invalid: record the refusal, answer with the error.
                self._write_now(
                    action,
                    Decision(id=decision_id, verdict=Verdict.DENY, rule=label, reason=str(exc)),
                )
                raise
            except InvalidAnswer as exc:
                verdict = Verdict.DENY
                reason = f"the canned answers of rule {label} do not fit the form: {exc}"
                # A mistake in the user's own rule (a misspelt field, a form that changed):
                # said where they look, not only in the audit log.
                log.warning("%s: %s; declined", action.server, reason)
            else:
                reason = f"canned answers from rule {label}"
                response = ElicitationResponse(action="accept", content=content)
        elif self.prompter.decided_by == "headless":
            # Headless mode, or a prompter with nobody to ask for this one (the gateway's,
            # for an ask no downstream call can be tied to): the same answer, said so.
            verdict, by = Verdict.DENY, "headless"
            reason = f"headless mode: nobody to answer and rule {label} gives no canned answers"
        elif self.prompter.decided_by == "no-terminal":
            verdict, by = Verdict.DENY, "no-terminal"
            reason = _no_terminal(f"a form to fill in; rule {label} gives no canned answers")
        else:
            verdict, by = Verdict.ALLOW, self.prompter.decided_by
            reason = f"shown to the {by} ({reason})"
        decision = Decision(id=decision_id, verdict=verdict, rule=label, reason=reason, by=by)
        await self._write_decision(action, decision)
        if verdict is Verdict.DENY:
            return ElicitationResponse(action="decline")
        start = self._clock()
        self._pending[decision_id] = action
        if response is None:
            try:
                response = await self.prompter.elicit(action)
            except InvalidAnswer as exc:
                # The answer does not fit the form (a callback's mistake: a typed prompter
                # asks again): never sent. The spec's cancel (nothing usable was chosen),
                # not a client error; one line naming the field, not the value (secret?).
                where = f" (field {exc.field!r})" if exc.field else ""
                log.warning(
                    "%s: the answer to the elicitation does not fit its form%s; cancelled",
                    action.server,
                    where,
                )
                response = ElicitationResponse(action="cancel")
            except BaseException as exc:
                self._pending.pop(decision_id, None)
                if self._audit is not None:
                    self._audit.write_now(
                        self._outcome_record(decision_id, action, None, exc, self._clock() - start)
                    )
                raise
        await self.record_outcome(
            decision_id, result=response.to_result(), duration=self._clock() - start
        )
        return response

    # -- audit --------------------------------------------------------------------------

    def _decision_record(self, action: Action, decision: Decision) -> dict[str, Any]:
        record: dict[str, Any] = {
            "event": "decision",
            "id": decision.id,
            "kind": action.kind.value,
            "server": action.server,
            "name": action.name,
            "trusted": action.trusted,
            "args": redact(_arguments(action)),
            "decision": decision.verdict.value,
            "rule": decision.rule,
            "reason": decision.reason,
            "by": decision.by,
            "mode": self.mode,
        }
        if decision.sampling is not None:
            record["max_tokens"] = decision.sampling.max_tokens
        via = getattr(action, "via", None)
        if via:
            record["via"] = dict(via)
        return record

    async def _write_decision(self, action: Action, decision: Decision) -> None:
        if self._audit is not None:
            await self._audit.write(self._decision_record(action, decision))

    def _write_now(self, action: Action, decision: Decision) -> None:
        if self._audit is not None:
            self._audit.write_now(self._decision_record(action, decision))
