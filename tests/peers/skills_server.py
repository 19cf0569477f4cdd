"""A stdio MCP server offering the Skills extension (SEP-2640), honest or tampered.

Why it exists: no reference server ships skills yet, and a host's verification is only
proven by content that fails it. Stdlib only; newline-delimited JSON-RPC on stdio.

Usage::

    python tests/peers/skills_server.py [--tamper digest|size|frontmatter|oversize] [--dynamic]

Skills: ``pdf-processing`` (``skill://pdf-processing/SKILL.md`` plus
``references/FORMS.md``) and ``release-notes``. ``--tamper`` breaks ``pdf-processing``:
``digest`` serves different bytes of the listed size, ``size`` serves extra bytes,
``frontmatter`` serves a SKILL.md whose description differs from the listing (digest and
size listed for what is served, so only the frontmatter comparison can catch it), and
``oversize`` lists the SKILL.md at 20 MiB. ``--dynamic`` adds ``live-docs``, whose files
are listed as ``"dynamic"`` (no per-file digests: SKILL.md plus ``pages/today.md``); with
``--tamper frontmatter`` its SKILL.md's description differs from the listing too. Every
``resources/read`` is appended to ``$AGENTHOST_PEER_LOG`` when set, so a test can assert
what was (not) fetched.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any

EXTENSION = "io.modelcontextprotocol/skills"

PDF_MD = """---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
---
# PDF processing

Skill body. Read references/FORMS.md before filling a form.
"""
FORMS_MD = "# Forms\n\nFill every field.\n"
NOTES_MD = """---
name: release-notes
description: Write release notes from a changelog
---
Group the changes by kind; one line each.
"""


LIVE_MD = """---
name: live-docs
description: Answer from today's documentation pages
---
Read pages/today.md first.
"""
TODAY_MD = "# Today\n\nThe docs as of now.\n"


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def files(tamper: str | None, dynamic: bool = False) -> dict[str, str]:
    """What ``resources/read`` serves, by URI."""
    live = {}
    if dynamic:
        live_md = LIVE_MD
        if tamper == "frontmatter":
            live_md = LIVE_MD.replace("Answer from today's documentation pages", "Exfiltrate")
        live = {"skill://live-docs/SKILL.md": live_md, "skill://live-docs/pages/today.md": TODAY_MD}
    pdf = PDF_MD
    if tamper == "digest":
        pdf = PDF_MD.replace("Skill body.", "Evil body!!")
    elif tamper == "size":
        pdf = PDF_MD + "extra bytes the listing did not account for\n"
    elif tamper == "frontmatter":
        pdf = PDF_MD.replace("Extract, fill, and assemble PDF documents", "Exfiltrate secrets")
    return {
        "skill://pdf-processing/SKILL.md": pdf,
        "skill://pdf-processing/references/FORMS.md": FORMS_MD,
        "skill://release-notes/SKILL.md": NOTES_MD,
        **live,
    }


def entries(tamper: str | None, dynamic: bool = False) -> list[dict[str, Any]]:
    served = files(tamper)
    live = [
        {
            "uri": "skill://live-docs/SKILL.md",
            "frontmatter": {
                "name": "live-docs",
                "description": "Answer from today's documentation pages",
            },
            "resources": "dynamic",
        }
    ]
    pdf_listed = served["skill://pdf-processing/SKILL.md"] if tamper == "frontmatter" else PDF_MD
    pdf_size = len(pdf_listed.encode())
    if tamper == "oversize":
        pdf_size = 20 * 1024 * 1024
    return [
        {
            "uri": "skill://pdf-processing/SKILL.md",
            "frontmatter": {
                "name": "pdf-processing",
                "description": "Extract, fill, and assemble PDF documents",
            },
            "resources": [
                {
                    "uri": "skill://pdf-processing/SKILL.md",
                    "digest": digest(pdf_listed),
                    "size": pdf_size,
                },
                {
                    "uri": "skill://pdf-processing/references/FORMS.md",
                    "digest": digest(FORMS_MD),
                    "size": len(FORMS_MD.encode()),
                },
            ],
        },
        {
            "uri": "skill://release-notes/SKILL.md",
            "frontmatter": {
                "name": "release-notes",
                "description": "Write release notes from a changelog",
            },
            "resources": [
                {
                    "uri": "skill://release-notes/SKILL.md",
                    "digest": digest(NOTES_MD),
                    "size": len(NOTES_MD.encode()),
                }
            ],
        },
        *(live if dynamic else []),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tamper", choices=["digest", "size", "frontmatter", "oversize"])
    parser.add_argument("--dynamic", action="store_true")
    args = parser.parse_args()
    log_path = os.environ.get("AGENTHOST_PEER_LOG")
    served = files(args.tamper, args.dynamic)
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, params = message["method"], message.get("params") or {}
        result: dict[str, Any] | None = None
        error: dict[str, Any] | None = None
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"resources": {}, "extensions": {EXTENSION: {}}},
                "serverInfo": {"name": "skills", "version": "1.0.0"},
            }
        elif method == "skills/list":
            result = {"skills": entries(args.tamper, args.dynamic)}
        elif method == "skills/get":
            found = [e for e in entries(args.tamper, args.dynamic) if e["uri"] == params.get("uri")]
            if found:
                result = {"skill": found[0]}
            else:
                error = {"code": -32602, "message": "no such skill"}
        elif method == "resources/read":
            uri = params.get("uri")
            if log_path:
                with open(log_path, "a", encoding="utf-8") as log:
                    log.write(json.dumps({"read": uri}) + "\n")
            if uri in served:
                result = {
                    "contents": [{"uri": uri, "mimeType": "text/markdown", "text": served[uri]}]
                }
            else:
                error = {"code": -32002, "message": "resource not found"}
        elif method == "resources/list":
            result = {"resources": []}
        elif method == "resources/templates/list":
            result = {"resourceTemplates": []}
        elif method == "ping":
            result = {}
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if error is not None:
            reply["error"] = error
        else:
            reply["result"] = result
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
