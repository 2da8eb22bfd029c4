"""Entry point of the ``masorch`` command: collects the command modules and reports errors cleanly."""

from __future__ import annotations

import importlib
import logging
import pkgutil
import signal
import sys
import threading
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

import masorch
from masorch.errors import MasorchError, UsageError
from masorch.redact import install_log_redaction, redact

_NOT_COMMANDS = {"main", "common"}


def build_app() -> typer.Typer:
    """The Typer app with every command module of ``masorch.cli`` registered, in name order."""
    app = typer.Typer(
        name="masorch",
        help="Holistic orchestration of LLM multi-agent systems.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback(invoke_without_command=True)
    def _root(
        version: bool = typer.Option(False, "--version", help="Print the version and exit."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages to stderr."),
    ) -> None:
        logging.basicConfig(
            level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
        )
        # Every record (the HTTP client's debug lines with their URLs too) loses URL credentials.
        install_log_redaction()
        if version:
            typer.echo(masorch.__version__)
            raise typer.Exit(0)

    import masorch.cli as cli_pkg

    for info in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if info.name in _NOT_COMMANDS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"masorch.cli.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(app)
    return app


#: The exit status of a command stopped by Ctrl-C (128 + SIGINT).
_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; a masorch error becomes one clear message and exit code 2 (usage) or 1."""
    _escape_unencodable_output()
    app = build_app()
    err = Console(stderr=True)
    previous = _stop_on_sigterm()
    try:
        # In non-standalone mode click returns a command's typer.Exit code instead of raising it.
        code = app(args=argv, prog_name="masorch", standalone_mode=False)
        if code == _INTERRUPTED:  # typer's word for Ctrl-C (it turns KeyboardInterrupt into Exit(130))
            err.print("aborted")
        if isinstance(code, int) and code:
            return code
    except MasorchError as exc:
        _print_error(err, exc.message, exc.hint)
        return 2 if isinstance(exc, UsageError) else 1
    except OSError as exc:
        # The file system refused (a full disk, a read-only or vanished path): name the file, exit 1.
        what = f"cannot use {exc.filename}" if exc.filename else "the file system refused a read or write"
        _print_error(
            err, f"{what}: {exc.strerror or exc}", "check the path, its permissions and the free space"
        )
        return 1
    except typer.Exit as exc:
        if exc.exit_code == _INTERRUPTED:
            err.print("aborted")
        return int(exc.exit_code or 0)
    except (typer.Abort, KeyboardInterrupt):
        err.print("aborted")
        return _INTERRUPTED
    except typer.TyperException as exc:  # bad flags and unknown commands, in non-standalone mode
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err.print(Text(f"error: {exc}"))
        return int(getattr(exc, "exit_code", 2))
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def _stop_on_sigterm() -> Any:
    """Make SIGTERM (``kill``, ``timeout``, a job scheduler) stop a command as Ctrl-C does, so its
    clean-up runs: a file being replaced keeps its old content and leaves no temporary file, a
    model server it started is stopped. Returns the handler it replaced (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def _escape_unencodable_output() -> None:
    # Text masorch prints may hold characters the terminal's encoding has no bytes for: a lone
    # surrogate (a plan's or a model's "\ud800" escape, a command-line argument with invalid bytes)
    # has none in UTF-8 either. Such a character is printed as its escape instead of a traceback.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)  # a TextIOWrapper; a replaced stream may not be
        if callable(reconfigure):
            reconfigure(errors="backslashreplace")


def _print_error(err: Console, message: str, hint: str) -> None:
    # Printed as text, not markup (a path may hold "[...]"), unwrapped (one line each, for grep and
    # scripts) and with URL credentials redacted.
    err.print(Text.assemble(("error", "bold red"), f": {redact(message)}"), soft_wrap=True)
    if hint:
        err.print(Text.assemble(("hint", "bold"), f": {redact(hint)}"), soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
