"""Typed, schema-versioned run events and their JSONL writer/reader."""
