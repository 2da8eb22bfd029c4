"""One exception family for masorch.

Every error carries a stable ``code``, a ``message`` that names the problem and a ``hint`` that names
the fix. The subclass says who must act:

* :class:`UsageError` - the user or developer (bad flag, bad config, missing extra, unreadable file);
* :class:`ModelError` - the model (its output must be fed back to it, e.g. an unparseable plan);
* :class:`RunError` - nobody in particular: the run failed (dead endpoint, budget spent, timeout).
"""

from __future__ import annotations

#: What reading a value of the wrong type or range out of a file masorch wrote raises (``"wall_s":
#: "abc"``, ``1e999`` where a count belongs); the readers that summarise such files turn these into a
#: :class:`UsageError` naming the file.
MALFORMED_VALUE = (KeyError, TypeError, ValueError, AttributeError, ArithmeticError)


class MasorchError(Exception):
    """Base class of every masorch error: a stable code, a message and a fix hint."""

    code: str = "masorch_error"
    retryable: bool = False

    def __init__(
        self, message: str, *, hint: str = "", code: str | None = None, retryable: bool | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code is not None:
            self.code = code
        if retryable is not None:
            self.retryable = retryable

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view: code, message, hint, retryable."""
        return {"code": self.code, "message": self.message, "hint": self.hint, "retryable": self.retryable}


class UsageError(MasorchError):
    """The caller must act: a bad argument, config, file or missing optional dependency."""

    code = "usage_error"


class MissingExtraError(UsageError):
    """An optional dependency is not installed; the hint names the exact ``pip install``."""

    code = "missing_extra"

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"the optional dependency '{package}' is not installed",
            hint=f"pip install 'masorch[{extra}]'",
        )


class ModelError(MasorchError):
    """The model must act: its output was unusable and can be fed back to it."""

    code = "model_error"


class RunError(MasorchError):
    """The run failed for a reason neither the caller nor the model can fix directly."""

    code = "run_error"


class BackendError(RunError):
    """An LLM backend call failed; ``retryable`` says whether trying again may help.

    ``attempts`` is how many requests the backend sent before giving up (None where it does not say;
    the run's ledger then counts one).
    """

    code = "backend_error"
    attempts: int | None = None


class BudgetExceeded(RunError):
    """A budget (calls, tokens, cost or wall time) would be exceeded by the next call."""

    code = "budget_exceeded"


class DeadlineExceeded(RunError):
    """A node timeout or the run deadline passed."""

    code = "deadline_exceeded"


def require_extra(module: str, extra: str) -> None:
    """Raise :class:`MissingExtraError` unless ``module`` can be imported.

    >>> require_extra("json", "core") is None
    True
    """
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(module, extra)
