"""agenthost tests (a package so helpers import as ``tests.schemacheck``)."""
