"""A server's JSON Schema, compiled as data: never a loader, never a backtracking regex.

Every schema a server sends and agenthost checks something against (a tool's
``outputSchema``, an elicitation's ``requestedSchema``) is compiled here, by
:func:`compile_peer_schema`, and nowhere else. jsonschema as it comes is not safe for a
schema written by someone else:

- its default registry *fetches* a ``$ref`` to an ``http://`` URL and *reads* one to a
  ``file://`` path, synchronously (a host on a cloud VM would fetch its metadata
  service for a server). Here only references inside the schema (``#...``) are
  resolved; any other ``$ref``, ``$dynamicRef`` or ``$recursiveRef`` refuses the schema,
  and the registry under the validator refuses to retrieve anything, should a reference
  be formed some other way (an ``$id`` changing the base).
- ``pattern``, ``patternProperties`` (and ``additionalProperties`` next to it) and the
  ``regex`` format run Python's backtracking ``re``: ``^(a|a)*$`` takes 2**n steps on n
  characters, and a worker thread cannot bound it because ``re`` holds the GIL. Here they
  run in RE2 (linear in the text); a pattern RE2 cannot compile (look-around,
  backreferences: outside JSON Schema's recommended regex subset) refuses the schema,
  as do more than :data:`MAX_PATTERNS` distinct patterns (each compiled one may use up to
  1 MiB; they share one bounded cache).
- ``uniqueItems`` compares every pair of items that do not sort (objects): quadratic in
  the array. Here each item is turned into a hashable key once: linear.
- a schema is a graph (local ``$ref``), so a small one can stand for a huge tree, and
  ``anyOf`` over a recursive reference doubles the work per level of the instance. Here
  the schema's size and depth are bounded, and so is the size it unfolds to through its
  references; every keyword a validation applies is counted against a budget
  proportional to the instance's size (a legitimate schema applies a few per value),
  and the thread's CPU clock is read every 16 (a keyword may build a message quoting a
  large value): validation stops with :class:`~agenthost.errors.SchemaRefused` at
  whichever bound comes first.

So a validation costs at most ``budget`` keyword applications, each charged one plus the
entries of its value (an ``enum`` of 20,000 costs 20,001) and otherwise bounded by the
size of its piece of instance (the message size bounds the instance): it runs inline, on
the event loop when the instance is small in values *and* in characters (one 4 MB string
is one value, yet each keyword quoting it costs milliseconds: :meth:`PeerSchema.inline`),
else in a worker thread (:meth:`PeerSchema.check`) that the same bounds end (``re``
would hold the GIL for the whole match, which is why patterns are RE2; jsonschema's own
Python work yields it every few milliseconds).
``format`` is an annotation by default (as JSON Schema 2020-12 says); ``formats=True``
asserts jsonschema's checks, ``regex`` in RE2.

Error messages quote the server's values cut to a few hundred characters.
"""

from __future__ import annotations

import contextvars
import functools
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import trio

from agenthost.errors import SchemaRefused

__all__ = [
    "INLINE_CHARS",
    "INLINE_VALUES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_PATTERNS",
    "MAX_UNFOLDED",
    "Mismatch",
    "PeerSchema",
    "check_pattern",
    "compile_peer_schema",
    "linear_regex",
]

#: Values (objects, arrays, scalars) in one schema: a large generated outputSchema has a
#: few thousand.
MAX_NODES = 50_000
#: Nesting of objects and arrays in a schema.
MAX_DEPTH = 64
#: Subschemas the schema stands for once every local ``$ref`` is replaced by its target.
MAX_UNFOLDED = 200_000
#: Distinct regular expressions in one schema: all of them stay compiled in
#: :func:`linear_regex`'s cache during a check (twice this many entries), so a check never
#: compiles one twice; each may use up to :func:`_re2_options`' ``max_mem``.
MAX_PATTERNS = 64
#: Keyword applications a validation may make: a base, plus so many per instance value
#: (a legitimate schema applies 3-4 per value, a ``oneOf`` of n branches about 4n; one
#: application costs jsonschema 5-10 us).
BUDGET_BASE = 5_000
BUDGET_PER_VALUE = 64
#: An instance of at most this many values is checked inline (at most
#: ``BUDGET_BASE + BUDGET_PER_VALUE * INLINE_VALUES`` applications, tens of ms): see
#: :meth:`PeerSchema.inline`.
INLINE_VALUES = 64
#: ... and of at most this many characters in its strings and keys, against a schema of
#: at most as many: a keyword's message quotes its piece of instance and its own value
#: (``repr``: an ``enum``, a ``not``), so what one application costs grows with both.
INLINE_CHARS = 16_384
#: CPU-time bound of one validation, seconds (read every :data:`_CLOCK_EVERY` keywords):
#: the last resort behind the budget. This thread's CPU time, not the wall clock, so that
#: a loaded machine does not fail a legitimate check.
DEADLINE = 5.0
_CLOCK_EVERY = 16

#: Keys whose value is a subschema (or, for ``items`` in old drafts, a list of them).
_ONE = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
#: Keys whose value is a list of subschemas.
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
#: Keys whose value maps names to subschemas.
_MAP = frozenset(
    {"$defs", "definitions", "dependentSchemas", "dependencies", "patternProperties", "properties"}
)
_REFS = ("$ref", "$dynamicRef", "$recursiveRef")
#: The dialects a server may name in ``$schema`` (its absence means 2020-12, as MCP says).
_DIALECTS = {
    "https://json-schema.org/draft/2020-12/schema": "Draft202012Validator",
    "https://json-schema.org/draft/2019-09/schema": "Draft201909Validator",
    "http://json-schema.org/draft-07/schema": "Draft7Validator",
    "http://json-schema.org/draft-06/schema": "Draft6Validator",
    "http://json-schema.org/draft-04/schema": "Draft4Validator",
}


@attrs.frozen
class Mismatch:
    """Where an instance does not fit the schema, and how."""

    #: The path of keys and indexes to the value that does not fit (empty: the root).
    path: tuple[str | int, ...]
    message: str

    @property
    def where(self) -> str:
        """The path for a message: ``a/0/b`` or ``(root)``, on one line and short (the
        keys are the server's: line breaks, escape sequences, megabytes)."""
        from agenthost_policies.text import printable

        shown = "/".join(_short(printable(str(p), one_line=True), 60) for p in self.path[:8])
        if len(self.path) > 8:
            shown += f"/... ({len(self.path) - 8} more)"
        return shown or "(root)"


class _OverBudget(Exception):
    """A validation spent its keyword budget or its time."""


@attrs.define
class _Meter:
    left: int
    deadline: float
    #: Each subschema's size with its references unfolded, by ``id`` (what an
    #: ``unevaluated*`` keyword in it costs: :func:`_metered_unevaluated`); ``unfolded``
    #: for one not in it.
    costs: Mapping[int, int]
    unfolded: int

    def spend(self, amount: int = 1) -> None:
        self.left -= amount
        if self.left < 0:
            raise _OverBudget("it needs more work than the instance's size allows")
        if self.left % _CLOCK_EVERY < amount and time.thread_time() > self.deadline:
            raise _OverBudget(f"it takes longer than {DEADLINE:g} s of CPU")


_METER: contextvars.ContextVar[_Meter] = contextvars.ContextVar("agenthost_schema_meter")


@attrs.frozen(eq=False)
class PeerSchema:
    """A server's schema, compiled: check instances with :meth:`first_error` or
    :meth:`best_error`, each bounded in work and time."""

    who: str
    _validator: Any
    #: Each subschema's unfolded size, by ``id`` (the schema, held by the validator,
    #: keeps them alive), and the whole schema's.
    _costs: Mapping[int, int]
    _unfolded: int
    #: Whether the schema itself is small enough for an inline check (its messages quote
    #: its values: an ``enum`` of one 4 MB string costs milliseconds per failure).
    _small: bool

    def inline(self, instance: Any) -> bool:
        """Whether checking ``instance`` costs little enough to run on the event loop: it
        is small (:data:`INLINE_VALUES`, :data:`INLINE_CHARS`), and so is the schema.

        A larger one may take seconds of jsonschema's pure-Python work (a legitimate
        result of 50,000 rows does; an attack is stopped at its budget or after
        :data:`DEADLINE`): the caller runs it in a worker thread, where it yields the GIL
        every few milliseconds, so the loop and every other server keep running.
        """
        return self._small and _small(instance)

    async def check(self, instance: Any, *, server: str, best: bool = False) -> Mismatch | None:
        """:meth:`first_error` (or :meth:`best_error` with ``best``), on the event loop when
        :meth:`inline` says so, else in a worker thread: a cancelled caller stops waiting
        at once, and the check's own bounds end the thread. Raises as those do.

        One ``server``'s checks take one thread at a time: each is seconds of pure Python
        that takes the GIL from the event loop every few milliseconds, and twenty at once
        kept the loop waiting over a second (one: about 10 ms).
        """
        pick = self.best_error if best else self.first_error
        if self.inline(instance):
            return pick(instance)
        return await trio.to_thread.run_sync(
            pick, instance, abandon_on_cancel=True, limiter=_threads_of(server)
        )

    def first_error(self, instance: Any) -> Mismatch | None:
        """The first place ``instance`` does not fit, or None.

        Raises:
            SchemaRefused: the check exceeded its bounds, or the schema turned out to be
                unusable while checking (a reference to nothing, recursion without end).
        """
        return self._run(lambda errors: next(errors, None), instance)

    def best_error(self, instance: Any) -> Mismatch | None:
        """jsonschema's most relevant error (``best_match``), or None. Raises as above."""
        import jsonschema

        return self._run(jsonschema.exceptions.best_match, instance)

    def _run(self, pick: Any, instance: Any) -> Mismatch | None:
        meter = _Meter(
            left=BUDGET_BASE + BUDGET_PER_VALUE * _values(instance),
            deadline=time.thread_time() + DEADLINE,
            costs=self._costs,
            unfolded=self._unfolded,
        )
        token = _METER.set(meter)
        try:
            error = pick(self._validator.iter_errors(instance))
        except _OverBudget as exc:
            raise SchemaRefused(f"{self.who}: the schema check was stopped: {exc}") from None
        except RecursionError:
            raise SchemaRefused(
                f"{self.who}: the schema check recursed too deep (a $ref cycle, or an"
                " instance nested too deep for it)"
            ) from None
        except Exception as exc:  # jsonschema's errors of a schema it cannot apply
            raise SchemaRefused(
                f"{self.who}: the schema cannot be applied ({type(exc).__name__})"
            ) from exc
        finally:
            _METER.reset(token)
        if error is None:
            return None
        return Mismatch(path=tuple(error.absolute_path), message=_short(error.message))


#: Per server name (from the configuration, so few), the limiter of its checks' threads.
_THREADS: trio.lowlevel.RunVar[dict[str, trio.CapacityLimiter]] = trio.lowlevel.RunVar(
    "agenthost_schema_threads"
)


def _threads_of(server: str) -> trio.CapacityLimiter:
    try:
        limiters = _THREADS.get()
    except LookupError:
        limiters = {}
        _THREADS.set(limiters)
    limiter = limiters.get(server)
    if limiter is None:
        limiter = limiters[server] = trio.CapacityLimiter(1)
    return limiter


def compile_peer_schema(schema: Any, *, who: str, formats: bool = False) -> PeerSchema:
    """Compile a schema a server sent, or refuse it.

    Args:
        who: what the schema is, for messages (``"h: tool 'add' outputSchema"``).
        formats: assert ``format`` (jsonschema's checks, ``regex`` by RE2) instead of
            treating it as an annotation.

    Raises:
        SchemaRefused: one line naming ``who`` and the problem: a reference that is not
            local, a pattern RE2 cannot run, a schema too large or too deep, an unknown
            ``$schema`` dialect. A schema that is malformed in another way (a ``type`` of
            5) is refused by the first check it cannot apply (see :meth:`first_error`).
    """
    import referencing.exceptions

    if not isinstance(schema, Mapping | bool):
        raise SchemaRefused(f"{who}: a schema must be an object or a boolean")
    try:
        chars = _check_shape(schema)
        dialect = _dialect(schema)
        cls = _validator_class(dialect)
        checker = _formats() if formats else None
        registry = _crawled(schema, cls)
        validator = cls(schema, registry=registry, format_checker=checker)
        costs = _unfolded_sizes(schema, validator)
    except SchemaRefused as exc:
        raise SchemaRefused(f"{who}: {exc}") from None
    except (RecursionError, referencing.exceptions.Unresolvable) as exc:
        raise SchemaRefused(f"{who}: a $ref cannot be resolved ({type(exc).__name__})") from None
    except Exception as exc:  # a malformed schema jsonschema or referencing choke on
        raise SchemaRefused(f"{who}: the schema cannot be compiled ({type(exc).__name__})") from exc
    return PeerSchema(who, validator, costs, costs.get(id(schema), 1), chars <= INLINE_CHARS)


def _short(text: str, limit: int = 200) -> str:
    """A message about the server's data, cut: it may quote an unbounded value."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _values(instance: Any) -> int:
    """How many values ``instance`` holds (objects, arrays and scalars), without recursion."""
    count = 0
    stack = [instance]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _small(instance: Any) -> bool:
    """At most :data:`INLINE_VALUES` values and :data:`INLINE_CHARS` characters (strings and
    keys); counting ends as soon as either is over."""
    values = chars = 0
    stack = [instance]
    while stack:
        item = stack.pop()
        values += 1
        if values > INLINE_VALUES or chars > INLINE_CHARS:
            return False
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, Mapping | list):
            if len(item) > INLINE_VALUES:
                return False
            if isinstance(item, Mapping):
                chars += sum(len(key) for key in item if isinstance(key, str))
                stack.extend(item.values())
            else:
                stack.extend(item)
    return chars <= INLINE_CHARS


def _subschemas(schema: Mapping[str, Any]) -> Iterator[Any]:
    """The schema's direct subschemas (values that are schemas, not data)."""
    for key, value in schema.items():
        if key in _ONE:
            if isinstance(value, list):
                yield from value
            else:
                yield value
        elif key in _LIST and isinstance(value, list):
            yield from value
        elif key in _MAP and isinstance(value, Mapping):
            yield from value.values()


def _check_shape(schema: Any) -> int:
    """Size and depth of the whole value; then every subschema's references and regexes.

    Returns:
        The characters of the schema's strings and keys.
    """
    nodes = chars = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise SchemaRefused(f"the schema has more than {MAX_NODES} values")
        if depth > MAX_DEPTH:
            raise SchemaRefused(f"the schema is nested more than {MAX_DEPTH} deep")
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, Mapping):
            chars += sum(len(key) for key in item if isinstance(key, str))
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    # A local reference may point anywhere in the schema (an unknown keyword's value, an
    # enum entry, a map of property names), relative to any resource in it: each target
    # is a subschema as well, so it is checked as one.
    resources = [schema, *_embedded_resources(schema)]
    pending = [schema]
    visited: set[int] = set()
    #: Each distinct reference, looked up once in every resource.
    looked_up: set[str] = set()
    patterns: set[str] = set()
    has_pattern_properties = has_unevaluated_properties = False
    while pending:
        sub = pending.pop()
        if not isinstance(sub, Mapping) or id(sub) in visited:
            continue
        visited.add(id(sub))
        for key in _REFS:
            ref = sub.get(key)
            if ref is not None and (not isinstance(ref, str) or not ref.startswith("#")):
                raise SchemaRefused(
                    f"{key} {_short(repr(ref), 80)} is refused: only local '#...'"
                    " references are resolved (nothing is fetched or read)"
                )
            if isinstance(ref, str) and ref not in looked_up:
                # the targets of a reference seen before are checked already, or pending
                looked_up.add(ref)
                if len(looked_up) * len(resources) > MAX_UNFOLDED:
                    raise SchemaRefused(
                        f"the schema needs more than {MAX_UNFOLDED} lookups to check"
                        " its $refs (too many distinct ones, and $ids)"
                    )
                segments = _segments(ref)
                pending.extend(_pointed(resource, segments) for resource in resources)
        pattern = sub.get("pattern")
        if isinstance(pattern, str):
            patterns.add(pattern)
            check_pattern(pattern, "pattern")
        names = sub.get("patternProperties")
        if isinstance(names, Mapping):
            has_pattern_properties = True
            for name in names:
                patterns.add(str(name))
                check_pattern(str(name), "patternProperties")
        if len(patterns) > MAX_PATTERNS:
            raise SchemaRefused(f"the schema has more than {MAX_PATTERNS} regular expressions")
        if "unevaluatedProperties" in sub:
            has_unevaluated_properties = True
        pending.extend(_subschemas(sub))
    if has_pattern_properties and has_unevaluated_properties:
        # jsonschema's unevaluatedProperties matches patternProperties with ``re`` itself.
        raise SchemaRefused(
            "patternProperties together with unevaluatedProperties is not supported"
        )
    return chars


def _embedded_resources(schema: Any) -> Iterator[Mapping[str, Any]]:
    """Every subschema (by keyword) with an ``$id`` (``id`` in draft 4) of its own: a base
    a ``#/...`` pointer inside it is relative to."""
    pending = [schema]
    while pending:
        sub = pending.pop()
        if isinstance(sub, Mapping):
            if sub is not schema and (
                isinstance(sub.get("$id"), str) or isinstance(sub.get("id"), str)
            ):
                yield sub
            pending.extend(_subschemas(sub))


def _segments(ref: str) -> list[str] | None:
    """The JSON pointer in the fragment of ``ref`` (``#/a/b``, percent-encoded), split as
    referencing splits it; None for an anchor (``#name``) or the whole resource."""
    fragment = urllib.parse.unquote(ref[1:])
    return fragment[1:].split("/") if fragment.startswith("/") else None


def _pointed(resource: Any, segments: list[str] | None) -> Any:
    """What ``segments`` (RFC 6901, as :func:`_segments` gives them) point at in
    ``resource``, or None (nothing there)."""
    if segments is None:
        return None
    target = resource
    for segment in segments:
        # As referencing reads it: an index is whatever int() takes ("-1", "+0", " 0").
        try:
            if isinstance(target, list):
                target = target[int(segment)]
            elif isinstance(target, Mapping):
                target = target[segment.replace("~1", "/").replace("~0", "~")]
            else:
                return None
        except (ValueError, LookupError):
            return None
    return target


def _dialect(schema: Any) -> str:
    declared = schema.get("$schema") if isinstance(schema, Mapping) else None
    if declared is None:
        return "Draft202012Validator"
    if not isinstance(declared, str):
        raise SchemaRefused("$schema must be a string")
    name = _DIALECTS.get(declared.rstrip("#"))
    if name is None:
        raise SchemaRefused(
            f"$schema {_short(repr(declared), 80)} is not a dialect agenthost checks"
            " (JSON Schema 2020-12, 2019-09, draft 7, 6 or 4)"
        )
    return name


def _crawled(schema: Any, cls: Any) -> Any:
    """A registry holding ``schema``, crawled: every ``$id``, ``$anchor`` and
    ``$dynamicAnchor`` in it known, and nothing retrievable.

    referencing's registries are immutable: one that is not crawled is crawled afresh by
    every lookup of an anchor from the validator's root resolver (the crawled copy goes to
    that lookup's result only), the whole schema each time: 1,000 references to 1,000
    anchors took 16 s to compile and seconds per check.
    """
    import referencing.jsonschema

    specification = referencing.jsonschema.specification_with(
        cls.META_SCHEMA["$schema"], default=referencing.jsonschema.DRAFT202012
    )
    resource = specification.create_resource(schema)
    registry: Any = referencing.Registry(retrieve=_retrieve_nothing)  # type: ignore[call-arg]
    return registry.with_resource(resource.id() or "", resource).crawl()


def _retrieve_nothing(uri: str) -> Any:
    import referencing.exceptions

    raise referencing.exceptions.NoSuchResource(uri)


# -- RE2 ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=2 * MAX_PATTERNS)
def linear_regex(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (bounded cache: patterns come from servers; at most
    128 MiB of automata in all, by ``max_mem``).

    Raises:
        re2.error: the pattern is invalid, needs backtracking, or needs too much memory.
    """
    return _re2().compile(pattern, _re2_options())


@functools.cache
def _re2() -> Any:
    import re2  # deferred: a command that never checks a schema pays nothing for it

    return re2


@functools.cache
def _re2_options() -> Any:
    options = _re2().Options()
    # A refused pattern is reported in our own words; RE2 must not also print to stderr.
    options.log_errors = False
    # Each compiled pattern may use this much for its automata (RE2's default is 8 MiB); a
    # pattern that needs more fails to compile and its schema is refused.
    options.max_mem = 1 << 20
    return options


def check_pattern(pattern: str, where: str) -> None:
    """Refuse ``pattern`` unless RE2 runs it (``where`` names it in the message).

    Raises:
        SchemaRefused: the pattern is invalid or needs backtracking (no ``who`` prefix).
    """
    try:
        linear_regex(pattern)
    except _re2().error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise SchemaRefused(
            f"{where} {_short(repr(pattern), 80)} is not a regular expression agenthost can"
            f" check in linear time (RE2 syntax: no look-around or backreferences): {detail}"
        ) from None


# -- the validator classes ---------------------------------------------------------------


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    import jsonschema

    if (
        isinstance(pattern, str)
        and validator.is_type(instance, "string")
        and not linear_regex(pattern).search(instance)
    ):
        yield jsonschema.ValidationError(f"{_short(repr(instance))} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = linear_regex(pattern)
        for key, value in instance.items():
            _METER.get().spend()
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    """jsonschema's ``additionalProperties``, with ``patternProperties`` matched by RE2."""
    import jsonschema

    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    regexes = [linear_regex(p) for p in schema.get("patternProperties", {})]
    extras = [
        key
        for key in instance
        if key not in known and not any(regex.search(key) for regex in regexes)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        shown = ", ".join(_short(repr(extra), 60) for extra in sorted(extras)[:5])
        more = f" and {len(extras) - 5} more" if len(extras) > 5 else ""
        yield jsonschema.ValidationError(
            f"Additional properties are not allowed ({shown}{more} unexpected)"
        )


def _unique_key(value: Any) -> Any:
    """A hashable key equal for values JSON Schema calls equal (1 == 1.0, True != 1)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, Mapping):
        return ("o", frozenset((key, _unique_key(item)) for key, item in value.items()))
    if isinstance(value, list | tuple):
        return ("a", tuple(_unique_key(item) for item in value))
    return ("s", value)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[Any]:
    import jsonschema

    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _unique_key(item)
        if key in seen:
            yield jsonschema.ValidationError(f"{_short(repr(instance))} has non-unique elements")
            return
        seen.add(key)


def _metered(keyword: Any) -> Any:
    """``keyword``, counting each application against the running validation's budget.

    A keyword whose value is a list or an object (``enum``, ``required``, ``allOf``,
    ``properties``, ...) walks it on each application, some without applying another
    keyword (``allOf`` of empty schemas, an ``enum`` compared item by item): it costs one
    more per entry.
    """

    def apply(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _METER.get().spend(_entries(value))
        return keyword(validator, value, instance, schema)

    return apply


def _entries(value: Any) -> int:
    """What one application of a keyword with this value walks: one, plus its entries,
    plus the entries of lists in an object (``dependentRequired: {"a": [20,000 names]}``)."""
    if isinstance(value, list):
        return 1 + len(value)
    if isinstance(value, Mapping):
        return 1 + len(value) + sum(len(v) for v in value.values() if isinstance(v, list))
    return 1


def _metered_unevaluated(keyword: Any) -> Any:
    """An ``unevaluated*`` keyword: jsonschema walks the subschemas around it without
    applying keywords (so uncounted), at most the schema's unfolded size per application:
    that is what it costs."""

    def apply(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        meter = _METER.get()
        meter.spend(1 + meter.costs.get(id(schema), meter.unfolded))
        return keyword(validator, value, instance, schema)

    return apply


@functools.cache
def _validator_class(name: str) -> Any:
    import jsonschema

    base = getattr(jsonschema, name)
    replaced = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "uniqueItems": _unique_items,
    }
    keywords = {}
    for keyword, apply in {**base.VALIDATORS, **replaced}.items():
        if keyword not in base.VALIDATORS:
            continue
        meter = _metered_unevaluated if keyword.startswith("unevaluated") else _metered
        keywords[keyword] = meter(apply)
    cls = jsonschema.validators.extend(base, keywords)
    # jsonschema's own evolve (run for every subschema and every $ref target) picks the
    # class by the subschema's `$schema`: jsonschema's plain class, with `re` and the
    # quadratic uniqueItems. Ours picks ours.
    cls.evolve = _evolve
    return cls


def _evolve(self: Any, **changes: Any) -> Any:
    """jsonschema's ``Validator.evolve``, staying within this module's classes: a
    subschema naming a dialect gets ours of it; one naming another keeps the current."""
    schema = changes.setdefault("schema", self.schema)
    cls = type(self)
    declared = schema.get("$schema") if isinstance(schema, Mapping) else None
    name = _DIALECTS.get(declared.rstrip("#")) if isinstance(declared, str) else None
    if name is not None:
        cls = _validator_class(name)
    for field in attrs.fields(type(self)):
        if field.init and field.alias not in changes:
            changes[field.alias] = getattr(self, field.name)
    return cls(**changes)


@functools.cache
def _formats() -> Any:
    """jsonschema's format checks, ``regex`` compiled by RE2 instead of ``re``."""
    import jsonschema

    checker = jsonschema.FormatChecker()
    checker.checks("regex", raises=_re2().error)(lambda text: linear_regex(text) is not None)
    return checker


def _unfolded_sizes(schema: Any, validator: Any) -> dict[int, int]:
    """How many subschemas each subschema stands for with each local ``$ref`` replaced by
    its target (a reference back into its own ancestors counts once), by ``id``; or
    refuse the schema when that is over the bound.

    Every local reference is resolved here too, so a reference to nothing is refused at
    compile time rather than at the first result.
    """
    resolver = validator._resolver
    sizes: dict[int, int] = {}
    active: set[int] = set()

    def size(sub: Any, resolver: Any, depth: int) -> int:
        if not isinstance(sub, Mapping):
            return 1
        key = id(sub)
        if key in sizes:
            return sizes[key]
        if key in active or depth > MAX_DEPTH * 4:
            return 1
        active.add(key)
        total = 1
        for ref_key in _REFS:
            ref = sub.get(ref_key)
            if isinstance(ref, str):
                resolved = resolver.lookup(ref)
                total += size(resolved.contents, resolved.resolver, depth + 1)
        for child in _subschemas(sub):
            total += size(child, resolver, depth + 1)
            if total > MAX_UNFOLDED:
                break
        active.discard(key)
        if total > MAX_UNFOLDED:
            raise SchemaRefused(
                f"the schema unfolds to more than {MAX_UNFOLDED} subschemas through its $refs"
            )
        sizes[key] = total
        return total

    size(schema, resolver, 0)
    return sizes
