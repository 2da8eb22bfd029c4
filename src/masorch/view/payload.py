"""Page data made safe to show and to embed: credentials redacted, JSON that cannot close a ``<script>``."""

from __future__ import annotations

import json
import math
from typing import Any

from masorch.backends.base import encodable
from masorch.redact import redact


def clean(value: Any) -> Any:
    """``value`` with :func:`~masorch.redact.redact` applied to every string in it (keys included),
    and each lone surrogate (which no page can encode) made U+FFFD.

    >>> clean({"model": "vllm:http://u:sk-1@h:8000/v1#m", "n": [1, "ok" + chr(0xD800)]})
    {'model': 'vllm:http://h:8000/v1#m', 'n': [1, 'ok\ufffd']}
    """
    if isinstance(value, str):
        return redact(encodable(value))
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or infinity
    if isinstance(value, dict):
        return {clean(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def to_json(value: Any) -> str:
    """Compact JSON of ``value`` with ``<``, ``>`` and ``&`` escaped, safe inside an HTML ``<script>``.

    >>> to_json({"a": "</script>"})
    '{"a":"\\\\u003c/script\\\\u003e"}'
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
