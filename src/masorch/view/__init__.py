"""Static HTML rendering of traces and eval runs."""
