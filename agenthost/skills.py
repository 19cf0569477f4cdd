"""Skills (SEP-2640, extension ``io.modelcontextprotocol/skills``): list, then load on demand.

A server that offers the extension lists skills with ``skills/list``: each entry names its
``SKILL.md`` (``skill://<path>/<name>/SKILL.md``), repeats that file's YAML frontmatter
(``name``, ``description``, ...) and lists every file of the skill with a ``sha256:``
digest and a size. An agent is given names and descriptions only; a skill's content is
fetched (``resources/read``) when it is actually used, never ahead of need (not on
connection, not on listing).

Why every byte is checked before use: a skill is instructions the model will follow, served
by a server we do not trust. The listing is what the user (or policy) saw and approved, so
what is read must be exactly that: the size and the digest of each file must match its
entry, and the frontmatter of the ``SKILL.md`` read must equal the listed one field by
field. Any mismatch refuses the skill (:class:`SkillVerificationError`) and nothing of the
unverified content is returned; the skill's other files are never read after a failure.

Bounds: at most :data:`MAX_SKILL_FILES` files per skill and :data:`MAX_SKILL_BYTES` in all
(the SEP's limits), at most ``max_pages`` pages of listing. A ``SKILL.md``'s frontmatter is
at most :data:`MAX_FRONTMATTER_BYTES` and is parsed in a worker thread: YAML parsing is
slow pure Python, and on the event loop a server's long frontmatter froze the host.
Whatever the parser raises (RecursionError for YAML nested thousands deep) is that
server's error (:func:`~agenthost.errors.server_data`).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from agenthost.errors import ProtocolError, server_data
from agenthost.protocol import methods as m
from agenthost.protocol.types import (
    BlobResourceContents,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ServerCapabilities,
    TextResourceContents,
)

if TYPE_CHECKING:
    from agenthost.session import ClientSession

__all__ = [
    "EXTENSION_ID",
    "MAX_FRONTMATTER_BYTES",
    "MAX_SKILLS",
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "LoadedSkill",
    "SkillEntry",
    "SkillFile",
    "SkillVerificationError",
    "get_skill",
    "list_skills",
    "load_skill",
    "load_skill_file",
    "offers_skills",
    "parse_frontmatter",
]

log = logging.getLogger("agenthost.skills")

EXTENSION_ID: Final = m.SKILLS_EXTENSION
#: The SEP's limits: a server SHOULD NOT serve more, a host need not take more.
MAX_SKILL_FILES: Final = 512
#: Skills kept from one server's listing: each is a line of the agent's skill tool, and
#: a listing is per-server data like any other, so it is bounded (the rest is said, not
#: kept).
MAX_SKILLS: Final = 1_000
MAX_SKILL_BYTES: Final = 16 * 1024 * 1024
#: A frontmatter holds a name, a description and a few short fields (Agent Skills caps
#: the description at 1,024 characters): 64 KiB is ample, and bounds the parse.
MAX_FRONTMATTER_BYTES: Final = 64 * 1024
_SKILL_MD: Final = "SKILL.md"
_DIGEST: Final = re.compile(r"^sha256:[0-9a-f]{64}$")
#: Agent Skills naming rules: 1-64 lowercase letters, digits and single inner hyphens.
_NAME: Final = re.compile(r"^(?=.{1,64}$)[a-z0-9]+(?:-[a-z0-9]+)*$")
#: What no skill URI needs and a path-climbing one does: controls (NUL, a line break),
#: blanks, a backslash, and the percent-encoded dot, slash, backslash and NUL.
_BAD_URI: Final = re.compile(r"[\x00-\x20\x7f\\]|%(?:2e|2f|5c|00)", re.IGNORECASE)
_FRONTMATTER: Final = re.compile(r"^---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)


class SkillVerificationError(ProtocolError):
    """A skill's content does not match what the server listed; it is not used."""


@attrs.frozen(kw_only=True)
class SkillFile:
    """One file of a skill, as listed: what its content must hash and weigh."""

    uri: str
    digest: str
    size: int


@attrs.frozen(kw_only=True)
class SkillEntry:
    """One ``skills/list`` entry."""

    uri: str
    frontmatter: Mapping[str, Any]
    #: Every file of the skill, or None when the server lists them as ``"dynamic"``.
    files: tuple[SkillFile, ...] | None

    @property
    def name(self) -> str:
        return str(self.frontmatter.get("name", ""))

    @property
    def description(self) -> str:
        return str(self.frontmatter.get("description", ""))

    def file(self, uri: str) -> SkillFile | None:
        return next((f for f in self.files or () if f.uri == uri), None)


@attrs.frozen(kw_only=True)
class LoadedSkill:
    """A verified skill: its ``SKILL.md`` text and the body after the frontmatter."""

    entry: SkillEntry
    text: str
    body: str


def offers_skills(capabilities: ServerCapabilities | None) -> bool:
    """Whether a server's capabilities declare the skills extension."""
    return EXTENSION_ID in m.declared_extensions(capabilities)


def _split(text: str) -> re.Match[str] | None:
    """The frontmatter block of ``text``, looked for within the bound only (a search of a
    16 MiB body for a closing ``---`` that never comes is work for nothing)."""
    head = text.removeprefix("\ufeff")[: MAX_FRONTMATTER_BYTES + 16]
    match = _FRONTMATTER.match(head)
    if match is None or len(match.group(1).encode("utf-8")) > MAX_FRONTMATTER_BYTES:
        return None
    return match


def parse_frontmatter(text: str) -> dict[str, Any] | None:
    """The YAML frontmatter of a ``SKILL.md`` (None when it has none, when it is longer
    than :data:`MAX_FRONTMATTER_BYTES`, or not a mapping).

    Blocking (CPU-bound): call it in a thread from async code, as :func:`load_skill` does.

    Raises:
        RecursionError: YAML nested deeper than the interpreter's recursion limit.
    """
    match = _split(text)
    if match is None:
        return None
    import yaml  # deferred: only a host that loads a skill pays for the parser

    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot name a skill's file, or None. A skill's files live under its
    URI: a ``..``, ``.`` or empty segment (``//``), or an encoded one, would let a listed
    file name something outside it once a server or a host maps the URI to a path."""
    if _BAD_URI.search(uri):
        return "a control character, blank, backslash or percent-encoded '.', '/' or NUL"
    _, sep, rest = uri.partition("://")
    if not sep or any(segment in ("", ".", "..") for segment in rest.split("/")):
        return "an empty, '.' or '..' path segment"
    return None


def _entry(raw: Any, server: str) -> SkillEntry:
    """Validate one listed entry (shape, URI, name, file list) into a :class:`SkillEntry`."""
    if not isinstance(raw, Mapping):
        raise ProtocolError(f"skills/list: an entry is not an object: {raw!r:.80}", server=server)
    uri = raw.get("uri")
    frontmatter = raw.get("frontmatter")
    if not isinstance(uri, str) or not uri.endswith("/" + _SKILL_MD):
        raise ProtocolError(f"skills/list: entry uri {uri!r:.120} is not a SKILL.md", server=server)
    if (problem := _uri_problem(uri)) is not None:
        raise ProtocolError(f"skills/list: entry uri {uri!r:.120} has {problem}", server=server)
    if not isinstance(frontmatter, Mapping):
        raise ProtocolError(f"skills/list: {uri}: no frontmatter object", server=server)
    segments = uri.split("://", 1)[-1].split("/")
    name = segments[-2] if len(segments) >= 2 else ""
    if not _NAME.fullmatch(name) or frontmatter.get("name") != name:
        raise ProtocolError(
            f"skills/list: {uri}: the skill name {name!r} is not a valid name equal to the"
            f" frontmatter name {frontmatter.get('name')!r:.80}",
            server=server,
        )
    resources = raw.get("resources")
    files: tuple[SkillFile, ...] | None
    if resources == "dynamic":
        files = None
    elif isinstance(resources, list):
        if len(resources) > MAX_SKILL_FILES:
            raise ProtocolError(
                f"skills/list: {uri}: {len(resources)} files (the limit is {MAX_SKILL_FILES})",
                server=server,
            )
        parsed = []
        base = uri[: -len(_SKILL_MD)]
        for item in resources:
            if not isinstance(item, Mapping):
                raise ProtocolError(
                    f"skills/list: {uri}: a file entry is not an object", server=server
                )
            file_uri, digest, size = item.get("uri"), item.get("digest"), item.get("size")
            if not isinstance(file_uri, str) or not file_uri.startswith(base):
                raise ProtocolError(
                    f"skills/list: {uri}: file {file_uri!r:.120} is outside the skill",
                    server=server,
                )
            if (problem := _uri_problem(file_uri)) is not None:
                raise ProtocolError(
                    f"skills/list: {uri}: file {file_uri!r:.120} has {problem}", server=server
                )
            if not isinstance(digest, str) or not _DIGEST.match(digest):
                raise ProtocolError(
                    f"skills/list: {file_uri}: bad digest {digest!r:.80}", server=server
                )
            if type(size) is not int or size < 0:
                raise ProtocolError(
                    f"skills/list: {file_uri}: bad size {size!r:.40}", server=server
                )
            parsed.append(SkillFile(uri=file_uri, digest=digest, size=size))
        total = sum(f.size for f in parsed)
        if total > MAX_SKILL_BYTES:
            raise ProtocolError(
                f"skills/list: {uri}: {total} bytes in all (the limit is {MAX_SKILL_BYTES})",
                server=server,
            )
        files = tuple(parsed)
    else:
        raise ProtocolError(
            f"skills/list: {uri}: resources is neither a list nor 'dynamic'", server=server
        )
    return SkillEntry(uri=uri, frontmatter=dict(frontmatter), files=files)


async def list_skills(session: ClientSession, *, max_pages: int = 50) -> list[SkillEntry]:
    """Every skill the server lists (``skills/list``, all pages, at most ``max_pages``
    pages and :data:`MAX_SKILLS` skills; past either bound the rest is left out, with a
    warning that says so).

    An entry that breaks the SEP's rules is left out, so one bad entry does not hide the
    good ones; when no entry is valid the problems are raised as :class:`ProtocolError`.
    """
    entries: list[SkillEntry] = []
    problems: list[str] = []
    cursor: str | None = None
    seen: set[str] = set()
    for page in range(max_pages + 1):
        if page == max_pages:
            log.warning(
                "%s: skills/list has more than %d pages: the rest are left out",
                session.name,
                max_pages,
            )
            break
        raw = await session.request(m.SKILLS_LIST_SPEC, PaginatedRequestParams(cursor=cursor))
        items = raw.get("skills")
        items = items if isinstance(items, list) else []
        room = MAX_SKILLS - len(entries)
        for item in items[:room]:
            try:
                with server_data(session.name, "skills/list: an entry"):
                    entries.append(_entry(item, session.name))
            except ProtocolError as exc:
                # Left out, and said: a skill the user cannot see must not vanish silently.
                log.warning("skill refused: %s", exc)
                problems.append(str(exc))
        cursor = raw.get("nextCursor")
        more = isinstance(cursor, str) and bool(cursor) and cursor not in seen
        if len(items) > room or (more and len(entries) >= MAX_SKILLS):
            log.warning(
                "%s: skills/list lists more than %d skills: the rest are left out",
                session.name,
                MAX_SKILLS,
            )
            break
        if not more:
            break
        seen.add(str(cursor))
    if problems and not entries:
        raise ProtocolError("; ".join(problems[:3]), server=session.name)
    return entries


async def get_skill(session: ClientSession, uri: str) -> SkillEntry:
    """``skills/get``: one entry by its ``SKILL.md`` URI."""
    raw = await session.request(m.SKILLS_GET_SPEC, ReadResourceRequestParams(uri=uri))
    with server_data(session.name, "skills/get"):
        return _entry(raw.get("skill"), session.name)


async def _read_bytes(session: ClientSession, uri: str) -> tuple[bytes, str | None]:
    """``resources/read`` of one file: its bytes (text as UTF-8) and its text, if text."""
    result = await session.request(m.RESOURCES_READ_SPEC, ReadResourceRequestParams(uri=uri))
    for contents in result.contents:
        if isinstance(contents, TextResourceContents):
            return contents.text.encode("utf-8"), contents.text
        if isinstance(contents, BlobResourceContents):
            try:
                return base64.b64decode(contents.blob, validate=True), None
            except ValueError:
                break
    raise ProtocolError(f"resources/read {uri}: no text or blob content", server=session.name)


def _verify(server: str, listed: SkillFile, data: bytes) -> None:
    if len(data) != listed.size:
        raise SkillVerificationError(
            f"skill file {listed.uri} is {len(data)} bytes, the listing says {listed.size}:"
            " refused (its content is not what was listed)",
            server=server,
        )
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != listed.digest:
        raise SkillVerificationError(
            f"skill file {listed.uri} does not match its listed digest: refused (its content"
            " is not what was listed)",
            server=server,
        )


async def load_skill(session: ClientSession, entry: SkillEntry) -> LoadedSkill:
    """Read a skill's ``SKILL.md`` and verify it against ``entry``; only then return it.

    Raises:
        SkillVerificationError: size, digest or frontmatter differ from the listing, or
            the listed size is past the limit (nothing is read then).
        ProtocolError, JSONRPCError: the read failed.
    """
    listed = entry.file(entry.uri)
    if entry.files is not None and listed is None:
        raise SkillVerificationError(
            f"skill {entry.uri}: its SKILL.md is not among its listed files", server=session.name
        )
    if listed is not None and listed.size > MAX_SKILL_BYTES:
        raise SkillVerificationError(
            f"skill {entry.uri}: SKILL.md is {listed.size} bytes, past the {MAX_SKILL_BYTES}-byte"
            " limit: not read",
            server=session.name,
        )
    data, text = await _read_bytes(session, entry.uri)
    if listed is not None:
        _verify(session.name, listed, data)
    if text is None:
        raise SkillVerificationError(
            f"skill {entry.uri}: SKILL.md is not text", server=session.name
        )
    with server_data(session.name, f"skill {entry.uri}: frontmatter"):
        # Cancellable: the caller moves on at once; the bounded parse ends by itself.
        frontmatter = await trio.to_thread.run_sync(parse_frontmatter, text, abandon_on_cancel=True)
    if frontmatter is None:
        raise SkillVerificationError(
            f"skill {entry.uri}: SKILL.md has no YAML frontmatter of at most"
            f" {MAX_FRONTMATTER_BYTES} bytes",
            server=session.name,
        )
    differ = sorted(
        key
        for key in set(frontmatter) | set(entry.frontmatter)
        if frontmatter.get(key) != entry.frontmatter.get(key)
    )
    if differ:
        raise SkillVerificationError(
            f"skill {entry.uri}: the frontmatter read differs from the listing in"
            f" {', '.join(differ)}: refused",
            server=session.name,
        )
    match = _split(text)
    body = text.removeprefix("\ufeff")[match.end() :] if match else text
    return LoadedSkill(entry=entry, text=text, body=body)


async def load_skill_file(session: ClientSession, entry: SkillEntry, uri: str) -> bytes:
    """Read one listed file of a skill (a reference, a script), verified like SKILL.md.

    Raises:
        SkillVerificationError: the file is not listed, or differs from its listing.
    """
    listed = entry.file(uri)
    if listed is None:
        if entry.files is not None:
            raise SkillVerificationError(
                f"skill {entry.uri}: {uri} is not one of its listed files", server=session.name
            )
        if not uri.startswith(entry.uri[: -len(_SKILL_MD)]) or _uri_problem(uri):
            raise SkillVerificationError(
                f"skill {entry.uri}: {uri!r:.200} is outside the skill", server=session.name
            )
    elif listed.size > MAX_SKILL_BYTES:
        raise SkillVerificationError(
            f"skill file {uri} is {listed.size} bytes, past the limit: not read",
            server=session.name,
        )
    data, _ = await _read_bytes(session, uri)
    if listed is not None:
        _verify(session.name, listed, data)
    return data
