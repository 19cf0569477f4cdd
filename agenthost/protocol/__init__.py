"""The MCP protocol without I/O: framing, revisions, types, the method table, lifecycle.

Nothing here imports Trio or httpx (tests/test_layers.py): a message is bytes in, events
out, so a server side or another runtime can reuse it."""
