"""``masorch view PATH``: a local web page for an eval run, a training run or a trace; ``--html`` exports it.

* ``masorch view DIR`` serves the page on http://127.0.0.1:8765/ until Ctrl-C (``--port``, ``--open``);
* ``masorch view DIR --html OUT.html`` writes the page and its data as one file and exits.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from masorch.errors import UsageError


def view_command(
    path: str = typer.Argument(..., help="An eval run directory, a training output_dir or a trace file."),
    port: int | None = typer.Option(
        None, "--port", help="Port to serve on (default 8765; 0 picks a free one)."
    ),
    host: str | None = typer.Option(
        None,
        "--host",
        help="Address to listen on (default 127.0.0.1, loopback: this machine only).",
    ),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in the default web browser."),
    html: str = typer.Option("", "--html", help="Write the page as one self-contained file and exit."),
) -> None:
    """Look at plans, runs, eval results and training in a web page (offline; nothing leaves the machine)."""
    from masorch.view.app import ViewApp
    from masorch.view.source import detect

    if port is not None and not 0 <= port <= 65535:
        raise UsageError(f"--port {port} is not a port", hint="give a number from 0 to 65535")
    app = ViewApp(detect(Path(path)))
    console = Console()
    if html:
        from masorch.view.export import export_html

        _refuse_server_flags(port, host, open_browser)
        out = export_html(app, Path(html))
        console.print(Text(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)"), highlight=False)
        return
    from masorch.listen import check_host
    from masorch.view.server import DEFAULT_HOST, DEFAULT_PORT, ViewServer

    host = DEFAULT_HOST if host is None else host
    port = DEFAULT_PORT if port is None else port
    check_host(host, port)
    server = ViewServer(app, host, port)
    if not server.loopback:
        console.print(
            Text(f"warning: listening on {host}: anyone who can reach it can read this run", style="yellow")
        )
    console.print(Text(f"viewing {path} ({app.source.kind}) at {server.url} (Ctrl-C stops)"), highlight=False)
    if open_browser:
        import webbrowser

        webbrowser.open(server.url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        server.server_close()


def _refuse_server_flags(port: int | None, host: str | None, open_browser: bool) -> None:
    """A UsageError for the flags of the served page given with ``--html`` (none of them applies)."""
    flags = (("--port", port is not None), ("--host", host is not None), ("--open", open_browser))
    given = [flag for flag, on in flags if on]
    if given:
        raise UsageError(
            f"{', '.join(given)} applies to the served page, not to --html",
            hint="drop it, or drop --html to serve the page",
        )


def register(app: typer.Typer) -> None:
    """Add ``masorch view`` to the CLI."""
    app.command("view")(view_command)
