"""Prompters: who answers when a rule says "ask".

One protocol, three implementations, one per mode:

* :class:`TerminalPrompter` (interactive): shows the full action on a terminal and reads
  the answer - once, always/never for this session - and runs elicitation forms. With no
  terminal on stdin there is nobody to ask: it asks nothing, prints nothing, and says so
  (``decided_by == "no-terminal"``) rather than passing end of input off as a "no".
* :class:`HeadlessPrompter` (headless): nobody is there; every ask is a deny, every form
  a decline, every review a rejection. Rules, not this class, are how headless runs allow.
* :class:`CallbackPrompter` (programmatic): an application that embeds the host answers
  through async callables.

The engine resolves rules, remembered choices and limits; a prompter only asks.
"""

from __future__ import annotations

import sys
import webbrowser
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TextIO

import attrs
import trio

from agenthost.errors import InvalidAnswer
from agenthost_policies.decision import (
    Action,
    Answer,
    DecidedBy,
    Elicitation,
    ElicitationResponse,
    PromptGet,
    ResourceRead,
    RootsExposure,
    Sampling,
    SamplingGrant,
    SkillLoad,
    ToolCall,
)
from agenthost_policies.elicitation import FormField, inspect_url, parse_form, validate_content
from agenthost_policies.rules import effective_annotations
from agenthost_policies.text import pretty_json, printable

__all__ = [
    "CallbackPrompter",
    "ConsentRequest",
    "HeadlessPrompter",
    "Prompter",
    "TerminalPrompter",
    "render_action",
]


@attrs.frozen(kw_only=True)
class ConsentRequest:
    """What a prompter is asked to decide: the action, and which rule sent it here."""

    action: Action
    rule: str
    reason: str
    #: Sampling only: the maxTokens and model limits that will apply if allowed.
    grant: SamplingGrant | None = None
    #: Tools only: what changed in the tool's definition since the user answered "always"
    #: (e.g. ``description``, ``annotations (readOnlyHint true -> false)``); empty when
    #: there is no such earlier answer.
    changes: tuple[str, ...] = ()


class Prompter(Protocol):
    """The three questions the engine may put to a human (or stand-in)."""

    @property
    def decided_by(self) -> DecidedBy:
        """Recorded in the decision's ``by`` field."""
        ...

    async def confirm(self, request: ConsentRequest) -> Answer:
        """Allow or deny one action (once, or for the rest of the session)."""
        ...

    async def review(self, action: Sampling, answer: str) -> bool:
        """Whether a generated sampling answer may go back to the server."""
        ...

    async def elicit(self, action: Elicitation) -> ElicitationResponse:
        """Answer an elicitation: accept (with validated content), decline or cancel."""
        ...


@attrs.frozen(kw_only=True)
class HeadlessPrompter:
    """Stand-in for the missing human of a headless run: no to everything."""

    decided_by: DecidedBy = "headless"

    async def confirm(self, request: ConsentRequest) -> Answer:
        return Answer.DENY

    async def review(self, action: Sampling, answer: str) -> bool:
        return False

    async def elicit(self, action: Elicitation) -> ElicitationResponse:
        return ElicitationResponse(action="decline")


@attrs.frozen(kw_only=True)
class CallbackPrompter:
    """Answers through the embedding application's async callables.

    Args:
        confirm: decides allow/deny/always/never for a :class:`ConsentRequest`.
        review: approves a generated sampling answer; without it answers are rejected
            (a rule can set ``review = "auto"`` instead).
        elicit: answers elicitations; without it they are declined. Accepted form content
            is validated against the requested schema before it is returned.
        timeout: seconds each callback may take; a callback that takes longer is
            cancelled and counts as "no" (deny, reject, cancel). ``None``: no limit.
    """

    confirm_callback: Callable[[ConsentRequest], Awaitable[Answer]] = attrs.field(alias="confirm")
    review_callback: Callable[[Sampling, str], Awaitable[bool]] | None = attrs.field(
        default=None, alias="review"
    )
    elicit_callback: Callable[[Elicitation], Awaitable[ElicitationResponse]] | None = attrs.field(
        default=None, alias="elicit"
    )
    timeout: float | None = 300.0
    decided_by: DecidedBy = "callback"

    async def confirm(self, request: ConsentRequest) -> Answer:
        answer: Answer | None = None
        with trio.move_on_after(self._limit()):
            answer = await self.confirm_callback(request)
        if answer is None:
            return Answer.DENY
        if not isinstance(answer, Answer):
            raise TypeError(f"the confirm callback must return an Answer, not {answer!r}")
        return answer

    async def review(self, action: Sampling, answer: str) -> bool:
        if self.review_callback is None:
            return False
        approved = False
        with trio.move_on_after(self._limit()):
            approved = bool(await self.review_callback(action, answer))
        return approved

    async def elicit(self, action: Elicitation) -> ElicitationResponse:
        if self.elicit_callback is None:
            return ElicitationResponse(action="decline")
        response = ElicitationResponse(action="cancel")
        with trio.move_on_after(self._limit()):
            response = await self.elicit_callback(action)
        if response.action == "accept" and action.mode == "form":
            content = await validate_content(
                action.requested_schema or {}, response.content or {}, server=action.server
            )
            return ElicitationResponse(action="accept", content=content)
        return response

    def _limit(self) -> float:
        return float("inf") if self.timeout is None else self.timeout


def _content_lines(content: Any) -> list[str]:
    blocks = content if isinstance(content, list) else [content]
    lines = []
    for block in blocks:
        if not isinstance(block, Mapping):
            lines.append(printable(repr(block)))
            continue
        kind = block.get("type")
        if kind == "text":
            lines.append(printable(str(block.get("text", ""))))
        elif kind in ("image", "audio"):
            size = len(str(block.get("data", ""))) * 3 // 4
            mime = printable(str(block.get("mimeType", "?")), one_line=True)
            lines.append(f"<{kind} {mime}, ~{size} bytes>")
        elif kind == "tool_use":
            lines.append(f"<tool call {printable(str(block.get('name')), one_line=True)}>")
            lines.append(pretty_json(block.get("input", {})))
        elif kind == "tool_result":
            lines.append(
                f"<tool result for {printable(str(block.get('toolUseId')), one_line=True)}>"
            )
            lines.extend(_content_lines(block.get("content", [])))
        else:
            lines.append(pretty_json(block))
    return lines


def render_action(request: ConsentRequest) -> str:
    """Everything a human needs to decide, as text safe for a terminal.

    Tool calls show the full arguments (never a summary: the spec wants the human to see
    what will run); sampling shows every message, the system prompt and the chosen model
    with the selection's reason.
    """
    action = request.action
    trust = "trusted" if action.trusted else "untrusted"
    lines = [f"Server:      {printable(action.server, one_line=True)} ({trust})"]
    if isinstance(action, ToolCall):
        lines.append(f"Tool:        {printable(action.tool, one_line=True)}")
        if request.changes:
            lines.append(
                "CHANGED:     the server redefined this tool since you answered 'always': "
                + printable("; ".join(request.changes))
            )
            if action.definition is not None and action.definition.description is not None:
                shown = action.definition.description[:1000]
                lines.append(f"Description now: {printable(shown)}")
        if action.annotations:
            note = "" if action.trusted else " (untrusted hints, not used for decisions)"
            lines.append(f"Annotations{note}: {pretty_json(action.annotations)}")
        hints = effective_annotations(action)
        flags = [k for k in ("readOnlyHint", "destructiveHint", "openWorldHint") if hints[k]]
        lines.append(f"Treated as:  {', '.join(flags)}")
        lines.append("Arguments:")
        lines.append(pretty_json(dict(action.arguments)))
    elif isinstance(action, PromptGet):
        lines.append(f"Prompt:      {printable(action.prompt, one_line=True)}")
        lines.append("Arguments:")
        lines.append(pretty_json(dict(action.arguments)))
    elif isinstance(action, ResourceRead):
        lines.append(f"Read:        {printable(action.uri, one_line=True)}")
    elif isinstance(action, SkillLoad):
        skill, uri = printable(action.skill, one_line=True), printable(action.uri, one_line=True)
        lines.append(f"Skill:       {skill} ({uri})")
        lines.append(f"Description: {printable(action.description)}")
        lines.append("Loading it gives the model this server's instructions to follow.")
    elif isinstance(action, RootsExposure):
        lines.append("Roots the server would see:")
        lines.extend(f"  {printable(uri, one_line=True)}" for uri in action.roots)
    elif isinstance(action, Sampling):
        model = f"{action.provider or '?'}/{action.model or '(not chosen yet)'}"
        lines.append(f"Model:       {printable(model, one_line=True)}")
        if action.model_reason:
            lines.append(f"Chosen because: {printable(action.model_reason)}")
        tokens = str(action.max_tokens)
        if request.grant is not None and request.grant.max_tokens != action.max_tokens:
            tokens += f" (capped to {request.grant.max_tokens})"
        lines.append(f"maxTokens:   {tokens}")
        if action.include_context not in ("none", ""):
            lines.append(f"includeContext: {printable(action.include_context, one_line=True)}")
        if action.tools:
            lines.append(f"Tools offered: {printable(', '.join(action.tools), one_line=True)}")
        lines.append("System prompt:")
        lines.append(f"  {printable(action.system_prompt)}" if action.system_prompt else "  (none)")
        lines.append("Messages:")
        for message in action.messages:
            role = printable(str(message.get("role", "?")))
            for index, line in enumerate(_content_lines(message.get("content"))):
                lines.append(f"  [{role}] {line}" if index == 0 else f"  {line}")
    elif isinstance(action, Elicitation):
        lines.append(f"Elicitation ({action.mode}): {printable(action.message)}")
    lines.append(f"Rule:        {printable(request.rule)}: {printable(request.reason)}")
    return "\n".join(lines)


_CONFIRM_KEYS = {
    "y": Answer.ALLOW,
    "yes": Answer.ALLOW,
    "n": Answer.DENY,
    "no": Answer.DENY,
    "a": Answer.ALWAYS,
    "always": Answer.ALWAYS,
    "v": Answer.NEVER,
    "never": Answer.NEVER,
}


class _Timeout(Exception):
    """Internal: no line arrived within the prompter's timeout."""


class TerminalPrompter:
    """Asks on a terminal (or any pair of text streams).

    Args:
        input: where answers are read; ``sys.stdin`` by default, and then only when it
            is a terminal: a pipe or ``/dev/null`` is not a person, so without one nothing
            is asked or printed, every ask is a deny, every review a rejection, every form
            a decline, and :attr:`decided_by` is ``"no-terminal"``. A stream passed here
            is read as the user's answers, terminal or not (an application's own UI).
        output: where questions are written; ``sys.stderr`` by default, so prompts never
            mix with a command's ``--json`` output.
        timeout: seconds to wait for each typed line; no answer counts as "no" (deny,
            reject, cancel).
        attempts: how often an unreadable answer is asked again before giving up (deny).
        open_url: opens a consented URL-mode elicitation; ``webbrowser.open`` by default,
            ``None`` to only print it.

    **Cancellation:** each read runs in a worker thread with ``abandon_on_cancel=True``, so
    cancelling the waiting task returns at once. The abandoned thread may still swallow the
    next line typed; that fails safe (the user is asked again), never approves.

    **Concurrency:** one question at a time (a lock), so parallel tool calls do not
    interleave their prompts.
    """

    def __init__(
        self,
        *,
        input: TextIO | None = None,
        output: TextIO | None = None,
        timeout: float = 300.0,
        attempts: int = 3,
        open_url: Callable[[str], object] | None = webbrowser.open,
    ) -> None:
        self._input = input if input is not None else sys.stdin
        self._needs_terminal = input is None
        self._output = output if output is not None else sys.stderr
        self._timeout = timeout
        self._attempts = attempts
        self._open_url = open_url
        self._lock = trio.Lock()

    @property
    def can_ask(self) -> bool:
        """Whether someone can answer: a given input stream, or stdin being a terminal.

        Looked at on every question, not once: stdin can be closed or replaced while a
        long session runs.
        """
        if not self._needs_terminal:
            return True
        try:
            return self._input.isatty()
        except (OSError, ValueError):  # closed or detached: nobody there either
            return False

    @property
    def decided_by(self) -> DecidedBy:
        """``"user"``, or ``"no-terminal"`` when nobody can be asked (see :attr:`can_ask`)."""
        return "user" if self.can_ask else "no-terminal"

    def _say(self, text: str) -> None:
        self._output.write(text)
        self._output.flush()

    async def _readline(self, prompt: str) -> str | None:
        """One line without its newline; ``None`` at end of input.

        Raises:
            _Timeout: no line within the timeout.
        """
        self._say(prompt)
        with trio.move_on_after(self._timeout):
            line: str = await trio.to_thread.run_sync(self._input.readline, abandon_on_cancel=True)
            return None if line == "" else line.rstrip("\r\n")
        self._say("\n(no answer in time)\n")
        raise _Timeout

    async def _choose(self, prompt: str, keys: Mapping[str, Any], default: Any) -> Any:
        """Ask until an answer in ``keys``; ``default`` on EOF, timeout or too many tries."""
        try:
            for _ in range(self._attempts):
                line = await self._readline(prompt)
                if line is None:
                    return default
                choice = keys.get(line.strip().lower())
                if choice is not None:
                    return choice
                self._say(f"Please answer one of: {', '.join(k for k in keys if len(k) == 1)}\n")
        except _Timeout:
            pass
        return default

    async def confirm(self, request: ConsentRequest) -> Answer:
        if not self.can_ask:
            return Answer.DENY  # nobody to show the question to: not shown
        async with self._lock:
            self._say(f"\n== agenthost: consent needed ({request.action.kind.value}) ==\n")
            self._say(render_action(request) + "\n")
            answer: Answer = await self._choose(
                "Allow? [y]es once / [n]o / [a]lways / ne[v]er: ",
                _CONFIRM_KEYS,
                Answer.DENY,
            )
            return answer

    async def review(self, action: Sampling, answer: str) -> bool:
        if not self.can_ask:
            return False
        async with self._lock:
            model = f"{action.provider or '?'}/{action.model or '?'}"
            self._say(
                f"\n== agenthost: review the answer for {printable(action.server)} "
                f"(model {printable(model)}) ==\n{printable(answer)}\n"
            )
            approved: bool = await self._choose(
                "Send this answer to the server? [y]es / [n]o: ",
                {"y": True, "yes": True, "n": False, "no": False},
                False,
            )
            return approved

    async def elicit(self, action: Elicitation) -> ElicitationResponse:
        if not self.can_ask:
            return ElicitationResponse(action="decline")
        async with self._lock:
            if action.mode == "url":
                return await self._elicit_url(action)
            return await self._elicit_form(action)

    async def _elicit_url(self, action: Elicitation) -> ElicitationResponse:
        info = inspect_url(action.url or "")
        self._say(
            f"\n== agenthost: {printable(action.server)} asks you to open a web page ==\n"
            f"{printable(action.message)}\n"
            f"  URL:    {printable(info.url)}\n"
            f"  Domain: >>> {printable(info.host)} <<<\n"
        )
        for warning in info.warnings:
            self._say(f"  WARNING: {warning}\n")
        choice: str = await self._choose(
            "Open it? [o]pen / [d]ecline / [c]ancel: ",
            {
                "o": "open",
                "open": "open",
                "d": "decline",
                "decline": "decline",
                "c": "cancel",
                "cancel": "cancel",
            },
            "cancel",
        )
        if choice == "open":
            if self._open_url is None:
                self._say(f"Open this URL yourself: {printable(info.url)}\n")
            else:
                opener = self._open_url
                with trio.move_on_after(self._timeout):
                    await trio.to_thread.run_sync(opener, info.url, abandon_on_cancel=True)
            return ElicitationResponse(action="accept")
        return ElicitationResponse(action="decline" if choice == "decline" else "cancel")

    async def _elicit_form(self, action: Elicitation) -> ElicitationResponse:
        schema = action.requested_schema or {}
        fields = parse_form(schema)
        self._say(
            f"\n== agenthost: {printable(action.server)} asks for information ==\n"
            f"{printable(action.message)}\n"
        )
        start = await self._choose(
            "[f]ill in / [d]ecline / [c]ancel: ",
            {
                "f": "fill",
                "fill": "fill",
                "d": "decline",
                "decline": "decline",
                "c": "cancel",
                "cancel": "cancel",
            },
            "cancel",
        )
        if start != "fill":
            return ElicitationResponse(action=start)
        while True:
            content = await self._fill(fields)
            if content is None:
                return ElicitationResponse(action="cancel")
            try:
                content = await validate_content(schema, content, fields, server=action.server)
            except InvalidAnswer as exc:
                self._say(f"  The form does not fit the server's schema: {printable(str(exc))}\n")
                fields = _with_defaults(fields, content)
                continue
            self._say("You are about to send:\n")
            for field in fields:
                shown = field.format_value(content[field.name]) if field.name in content else "-"
                self._say(f"  {printable(field.title or field.name)}: {printable(shown)}\n")
            final = await self._choose(
                "[s]end / [e]dit / [d]ecline / [c]ancel: ",
                {
                    "s": "send",
                    "send": "send",
                    "e": "edit",
                    "edit": "edit",
                    "d": "decline",
                    "decline": "decline",
                    "c": "cancel",
                    "cancel": "cancel",
                },
                "cancel",
            )
            if final == "send":
                return ElicitationResponse(action="accept", content=content)
            if final != "edit":
                return ElicitationResponse(action=final)
            fields = _with_defaults(fields, content)

    async def _fill(self, fields: tuple[FormField, ...]) -> dict[str, Any] | None:
        """Ask every field in turn; ``None`` when the user gives up (EOF, time, tries)."""
        content: dict[str, Any] = {}
        for field in fields:
            self._say(field.render() + "\n")
            for _ in range(self._attempts):
                try:
                    line = await self._readline("> ")
                except _Timeout:
                    return None
                if line is None:
                    return None
                try:
                    value = field.parse(line)
                except InvalidAnswer as exc:
                    self._say(f"  Not accepted: {printable(str(exc))}\n")
                    continue
                if value is not None:
                    content[field.name] = value
                break
            else:
                return None
        return content


def _with_defaults(
    fields: tuple[FormField, ...], content: Mapping[str, Any]
) -> tuple[FormField, ...]:
    """The same form with the previous answers as defaults, for "edit"."""
    return tuple(
        attrs.evolve(field, default=content[field.name]) if field.name in content else field
        for field in fields
    )
