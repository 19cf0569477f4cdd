"""``${VAR}`` expansion for config values, and the small ``.env`` reader behind ``envFile``.

Syntax (one scanner for every config format, so a value means the same thing everywhere):

* ``${NAME}``: the variable's value; an unset variable is an error naming it and the key
  path where it was used. Names are ``[A-Za-z_][A-Za-z0-9_]*``.
* ``${NAME:-default}``: the default when the variable is unset *or empty* (as in the
  shell). The default is itself expanded, so ``${A:-${B}}`` works.
* ``$$``: a literal ``$``. A ``$`` followed by anything but ``$`` or ``{`` is literal too.
* Editor files only (``mcpServers`` / VS Code JSON, where those editors define them):
  ``${env:NAME}`` (same as ``${NAME}``), ``${input:id}`` (a declared VS Code input, read
  from ``AGENTHOST_INPUT_<ID>``; we never prompt while loading), ``${workspaceFolder}``,
  ``${workspaceFolderBasename}``, ``${userHome}``, ``${pathSeparator}`` and ``${/}``.

Values that come from the environment are never put into an error message: they are
often tokens. Text that came from the file itself (a default, a malformed reference) is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import attrs

from agenthost.errors import ConfigError

__all__ = [
    "MAX_NESTING",
    "ExpandContext",
    "InputSpec",
    "expand",
    "input_variable",
    "read_env_file",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]")


@attrs.frozen(kw_only=True)
class InputSpec:
    """A VS Code ``inputs`` entry: what the user would have been prompted for."""

    id: str
    description: str | None = None


#: How deep ``${A:-${B:-...}}`` defaults may nest.
MAX_NESTING = 32


def input_variable(input_id: str) -> str:
    """The environment variable that answers VS Code input ``input_id``.

    ``api-key`` -> ``AGENTHOST_INPUT_API_KEY``: uppercased, every non-alphanumeric
    character replaced by ``_`` so any id maps to a settable variable name.
    """
    return "AGENTHOST_INPUT_" + _NON_ALNUM.sub("_", input_id).upper()


@attrs.frozen(kw_only=True)
class ExpandContext:
    """Everything one file's expansion needs; built once per load, shared by every value."""

    env: Mapping[str, str]
    #: The file, for error messages.
    source: str | None = None
    #: Editor predefined variables (``workspaceFolder`` ...); ``None`` for TOML, where
    #: ``${workspaceFolder}`` is an ordinary environment variable name.
    editor: Mapping[str, str] | None = None
    #: Declared VS Code inputs by id; ``${input:...}`` is only accepted when not ``None``.
    inputs: Mapping[str, InputSpec] | None = None

    @classmethod
    def for_editor(
        cls,
        *,
        env: Mapping[str, str],
        source: str | None,
        workspace_folder: Path,
        inputs: Mapping[str, InputSpec] | None = None,
    ) -> ExpandContext:
        """The context for an editor's JSON file, whose ``${workspaceFolder}`` is given."""
        editor = {
            "workspaceFolder": str(workspace_folder),
            "workspaceFolderBasename": workspace_folder.name,
            "userHome": os.path.expanduser("~"),
            "pathSeparator": os.sep,
            "/": os.sep,
        }
        return cls(env=env, source=source, editor=editor, inputs=inputs or {})


def expand(text: str, ctx: ExpandContext, key: str, *, depth: int = 0) -> str:
    """Expand every reference in ``text``; ``key`` is the key path used in errors.

    ``depth`` counts the defaults we are inside (``${A:-${B:-...}}``); past
    :data:`MAX_NESTING` the value is refused: a config file is input too, and 2,000
    nested defaults must be a ConfigError, not a RecursionError (issue 14).

    Raises:
        ConfigError: an unset variable, an undeclared or unanswered input, a malformed
            reference, or references nested too deep, naming ``ctx.source`` and ``key``.
    """
    if "$" not in text:  # the common case: no work, no copy
        return text
    if depth > MAX_NESTING:
        raise ConfigError(
            f"variable references nested more than {MAX_NESTING} deep",
            path=ctx.source,
            key=key,
        )
    out: list[str] = []
    i = 0
    n = len(text)
    while True:
        j = text.find("$", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        nxt = text[j + 1 : j + 2]
        if nxt == "$":
            out.append("$")
            i = j + 2
        elif nxt == "{":
            end = _closing_brace(text, j + 2)
            if end < 0:
                raise ConfigError(
                    f"unterminated '${{' at character {j + 1} (write '$$' for a literal '$')",
                    path=ctx.source,
                    key=key,
                )
            out.append(_resolve(text[j + 2 : end], ctx, key, depth))
            i = end + 1
        else:
            out.append("$")
            i = j + 1
        if i >= n:
            return "".join(out)


def _closing_brace(text: str, start: int) -> int:
    """Index of the ``}`` closing a ``${`` whose body starts at ``start``, or -1.

    Braces nest so that a default may hold a reference: ``${A:-${B}}``.
    """
    depth = 1
    for k in range(start, len(text)):
        c = text[k]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return k
    return -1


def _resolve(body: str, ctx: ExpandContext, key: str, depth: int) -> str:
    name, sep, default = body.partition(":-")
    if sep and _NAME.match(name):
        value = ctx.env.get(name)
        return value if value else expand(default, ctx, key, depth=depth + 1)
    if _NAME.match(body):
        if ctx.editor is not None and body in ctx.editor:
            return ctx.editor[body]
        return _lookup(body, ctx, key)
    if ctx.editor is not None:
        if body == "/":
            return ctx.editor["/"]
        prefix, colon, rest = body.partition(":")
        if colon and prefix == "env" and _NAME.match(rest):
            return _lookup(rest, ctx, key)
        if colon and prefix == "input" and ctx.inputs is not None:
            return _input(rest, ctx, key)
    raise ConfigError(
        f"'${{{body}}}' is not a variable reference this file format supports (use ${{NAME}}"
        " or ${NAME:-default}, NAME being letters, digits and '_', not starting with a digit;"
        " write '$$' for a literal '$')",
        path=ctx.source,
        key=key,
    )


def _lookup(name: str, ctx: ExpandContext, key: str) -> str:
    value = ctx.env.get(name)
    if value is None:
        raise ConfigError(
            f"environment variable {name!r} is not set (set it, or give a default with"
            f" ${{{name}:-default}})",
            path=ctx.source,
            key=key,
        )
    return value


def _input(input_id: str, ctx: ExpandContext, key: str) -> str:
    assert ctx.inputs is not None
    spec = ctx.inputs.get(input_id)
    if spec is None:
        raise ConfigError(
            f"'${{input:{input_id}}}' refers to input {input_id!r}, which is not declared in"
            " the file's 'inputs'",
            path=ctx.source,
            key=key,
        )
    var = input_variable(input_id)
    value = ctx.env.get(var)
    if value is None:
        about = f" ({spec.description})" if spec.description else ""
        raise ConfigError(
            f"needs input {input_id!r}{about}; agenthost does not prompt while loading"
            f" config: set the environment variable {var}",
            path=ctx.source,
            key=key,
        )
    return value


def read_env_file(
    path: Path,
    *,
    source: str | None,
    key: str,
    shown_as: str | None = None,
    contents: Mapping[str, bytes] | None = None,
) -> dict[str, str]:
    """Read a dotenv file (``envFile`` in VS Code and Cursor configs).

    Lines are ``NAME=value`` with an optional ``export`` prefix; blank lines and lines
    starting with ``#`` are skipped; a value wrapped in matching single or double quotes
    is unwrapped (double quotes also understand ``\\n``, ``\\t``, ``\\"`` and ``\\\\``).
    Values are taken literally otherwise, not expanded.

    ``shown_as`` is how the file is named in errors (the config's unexpanded text, so a
    value that came from the environment is not echoed); default: ``path``.
    ``contents``: read the file from these bytes (by resolved path), never the disk: a
    trusted project's env file is what was digested (a file not among them is refused).

    Raises:
        ConfigError: the file cannot be read (naming ``source``, the config file, and
            ``key``, the key that named the env file), or a line is not ``NAME=value``
            (naming the env file and the line number; the line itself is never shown, it
            may hold a secret).
    """
    try:
        if contents is None:
            text = path.read_text(encoding="utf-8")
        elif str(path.resolve()) in contents:
            text = contents[str(path.resolve())].decode("utf-8")
        else:
            raise FileNotFoundError(0, "not one of the files that were read and trusted")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f"cannot read env file {shown_as or repr(str(path))}: {reason}", path=source, key=key
        ) from None
    result: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, eq, value = line.partition("=")
        name = name.strip()
        if not eq or not _NAME.match(name):
            raise ConfigError(
                f"line {lineno}: expected NAME=value with NAME made of letters, digits and '_'",
                path=str(path),
                key=key,
            )
        result[name] = _unquote(value.strip())
    return result


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] == "'":
            return inner
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), inner)
    return value
