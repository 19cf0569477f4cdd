"""A hostile skills server (SEP-2640) over stdio, for issue 28's findings.

Why it exists: tests/peers/skills_server.py tampers with honest skills; this one serves
what no honest server would (frontmatter nested thousands deep or megabytes long, listings
of millions of skills, pages without end, URIs that climb out of the skill) so each
defect is reproduced against a real process. Stdlib only; newline-delimited JSON-RPC.

Usage::

    python tests/hostile/hostile_skills_server.py '{"skills": [...], "flood": {...}}'

``skills``: each ``{"name", "yaml", "body", "listed", "uri", "files"}``; the ``SKILL.md``
served is ``---\\n<yaml>\\n---\\n<body>`` (``yaml`` defaults to the name and a
description), listed with its real size and digest and the ``listed`` frontmatter
(default: name and description). ``pad``: that many more keys (``kN: [N, N]``), in the
YAML and the listing alike. ``uri`` overrides the SKILL.md URI (listed and served);
``files`` lists extra file URIs (served as ``x``).

``flood``: ``{"per_page": N, "pages": P}`` lists N generated skills per page for P pages
(``P`` 0: pages without end, each with a next cursor). With ``record`` (a path), the
method of every request received is appended to it, one line each.
"""

from __future__ import annotations

import hashlib
import json
import sys
from typing import Any

EXTENSION = "io.modelcontextprotocol/skills"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Server:
    def __init__(self, config: dict[str, Any]) -> None:
        self.record = config.get("record")
        self.flood: dict[str, int] | None = config.get("flood")
        self.served: dict[str, str] = {}
        self.entries: list[dict[str, Any]] = []
        for skill in config.get("skills", []):
            name = skill["name"]
            yaml = skill.get("yaml", f"name: {name}\ndescription: d")
            pad = int(skill.get("pad", 0))
            yaml += "".join(f"\nk{n}: [{n}, {n}]" for n in range(pad))
            listed = {"name": name, "description": "d"} | {f"k{n}": [n, n] for n in range(pad)}
            text = f"---\n{yaml}\n---\n{skill.get('body', 'Body.')}\n"
            uri = skill.get("uri", f"skill://{name}/SKILL.md")
            self.served[uri] = text
            files = [{"uri": uri, "digest": digest(text.encode()), "size": len(text.encode())}]
            for extra in skill.get("files", []):
                self.served[extra] = "x"
                files.append({"uri": extra, "digest": digest(b"x"), "size": 1})
            self.entries.append(
                {
                    "uri": uri,
                    "frontmatter": skill.get("listed", listed),
                    "resources": files,
                }
            )

    def page(self, cursor: str | None) -> dict[str, Any]:
        if self.flood is None:
            return {"skills": self.entries}
        number = int(cursor or 0)
        per_page, pages = self.flood["per_page"], self.flood["pages"]
        entry = {"frontmatter": {"description": "d"}, "resources": "dynamic"}
        skills = [
            {**entry, "uri": f"skill://g-{number}-{k}/SKILL.md"}
            | {"frontmatter": {"name": f"g-{number}-{k}", "description": "d"}}
            for k in range(per_page)
        ]
        result: dict[str, Any] = {"skills": skills}
        if pages == 0 or number + 1 < pages:
            result["nextCursor"] = str(number + 1)
        return result

    def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"resources": {}, "extensions": {EXTENSION: {}}},
                "serverInfo": {"name": "hostile-skills", "version": "1.0.0"},
            }
        if method == "skills/list":
            return self.page(params.get("cursor"))
        if method == "resources/read":
            uri = params.get("uri")
            text = self.served.get(str(uri), "")
            return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]}
        if method in ("resources/list", "resources/templates/list"):
            key = "resources" if method == "resources/list" else "resourceTemplates"
            return {key: []}
        return {}

    def serve(self) -> None:
        for line in sys.stdin:
            if not line.strip():
                continue
            message = json.loads(line)
            if "id" not in message or "method" not in message:
                continue
            if self.record:
                with open(self.record, "a", encoding="utf-8") as log:
                    log.write(message["method"] + "\n")
            result = self.answer(message["method"], message.get("params") or {})
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    Server(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}).serve()
