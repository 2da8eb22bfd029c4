"""Typed, schema-versioned run events and their JSONL writer/reader."""

from masorch.trace.events import (
    LlmCall,
    NodeFinished,
    NodeStarted,
    PlanParsed,
    PlanRejected,
    RunFinished,
    RunStarted,
    ToolResult,
)
from masorch.trace.writer import MemoryTrace, TraceSink, TraceWriter, read_trace

__all__ = [
    "LlmCall",
    "MemoryTrace",
    "NodeFinished",
    "NodeStarted",
    "PlanParsed",
    "PlanRejected",
    "RunFinished",
    "RunStarted",
    "ToolResult",
    "TraceSink",
    "TraceWriter",
    "read_trace",
]
