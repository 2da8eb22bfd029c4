"""LLM access behind one protocol.

The protocol types and the scripted backend load at once; the HTTP, local, cache and loopback
backends load on first use, so ``import masorch.backends`` stays light.
"""

from typing import TYPE_CHECKING

from masorch._lazy import lazy_exports
from masorch.backends.base import (
    Backend,
    Completion,
    GenerateConfig,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
)
from masorch.backends.scripted import ScriptedBackend

_LAZY = {
    "OpenAIBackend": "masorch.backends.openai_compat",
    "Pricing": "masorch.backends.prices",
    "PriceTable": "masorch.backends.prices",
    "PricedBackend": "masorch.backends.prices",
    "RetryPolicy": "masorch.backends.openai_compat",
    "LocalBackend": "masorch.backends.local",
    "CachedBackend": "masorch.backends.cache",
    "ResponseCache": "masorch.backends.cache",
    "BackendSettings": "masorch.backends.registry",
    "make_backend": "masorch.backends.registry",
    "LoopbackServer": "masorch.backends.loopback",
    "FaultPlan": "masorch.backends.loopback",
    "ModelStore": "masorch.backends.models",
}
__getattr__ = lazy_exports(__name__, _LAZY)

if TYPE_CHECKING:
    from masorch.backends.cache import CachedBackend, ResponseCache
    from masorch.backends.local import LocalBackend
    from masorch.backends.loopback import FaultPlan, LoopbackServer
    from masorch.backends.models import ModelStore
    from masorch.backends.openai_compat import OpenAIBackend, RetryPolicy
    from masorch.backends.prices import PricedBackend, PriceTable, Pricing
    from masorch.backends.registry import BackendSettings, make_backend

__all__ = [
    "Backend",
    "BackendSettings",
    "CachedBackend",
    "Completion",
    "FaultPlan",
    "GenerateConfig",
    "LocalBackend",
    "LoopbackServer",
    "Message",
    "ModelStore",
    "OpenAIBackend",
    "PriceTable",
    "PricedBackend",
    "Pricing",
    "ResponseCache",
    "RetryPolicy",
    "ScriptedBackend",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "make_backend",
]
