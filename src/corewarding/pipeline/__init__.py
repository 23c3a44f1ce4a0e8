"""Orchestration: select cells, reproduce their data, train, evaluate, ingest and publish them (flows/ wires it)."""
