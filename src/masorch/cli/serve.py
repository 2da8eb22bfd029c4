"""``masorch serve``: systems as models behind an OpenAI-compatible endpoint (docs/serve.md)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import typer

from masorch.errors import UsageError, require_extra
from masorch.run.system import System

#: The environment variable a bearer token may come from (so it stays out of shell history).
TOKEN_ENV = "MASORCH_SERVE_TOKEN"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(app: typer.Typer) -> None:
    """Add the ``serve`` command to ``app``."""

    @app.command("serve")
    def serve_cmd(
        systems: str | None = typer.Option(
            None, "--systems", help="Systems to serve, e.g. mas:high,sas:cot."
        ),
        config: Path | None = typer.Option(  # noqa: B008
            None, "--config", help="A systems file (as eval's): names, models, budgets."
        ),
        model: str | None = typer.Option(None, "--model", help="Model of the --systems."),
        orchestrator: str | None = typer.Option(None, "--orchestrator", help="Orchestrator of mas systems."),
        host: str = typer.Option(
            "127.0.0.1", "--host", help="Address to bind (not loopback: needs a token)."
        ),
        port: int = typer.Option(8000, "--port", min=1, max=65535, help="Port to bind."),
        token: str | None = typer.Option(
            None, "--token", help=f"Bearer token clients send (or ${TOKEN_ENV})."
        ),
        concurrency: int = typer.Option(4, "--concurrency", min=1, help="Runs at once; more requests wait."),
        timeout: float = typer.Option(1800.0, "--timeout", min=1, help="Deadline of one request (seconds)."),
        cache: Path | None = typer.Option(  # noqa: B008
            None, "--cache", help="Record/replay cache of every call (SQLite)."
        ),
        max_tokens: int | None = typer.Option(
            None, "--max-tokens", min=16, help="Cap of each sub-agent call."
        ),
        threads: int | None = typer.Option(None, "--threads", min=1, help="CPU threads of a local: model."),
        slots: int | None = typer.Option(
            None, "--slots", min=1, max=64, help="Requests a local: model decodes."
        ),
    ) -> None:
        """Serve systems as models: POST /v1/chat/completions with model=SYSTEM, GET /v1/models."""
        require_extra("starlette", "serve")
        require_extra("uvicorn", "serve")
        token = (token or os.environ.get(TOKEN_ENV) or "").strip() or None  # blank: no token
        if not _loopback(host) and token is None:
            raise UsageError(
                f"--host {host} serves beyond this machine without a token",
                hint=f"set --token or ${TOKEN_ENV}, or bind 127.0.0.1",
            )
        from masorch.eval.systems import systems_from_flags

        defaults = {"model": model, "orchestrator": orchestrator}
        specs = systems_from_flags(systems, config, {k: v for k, v in defaults.items() if v is not None})
        _serve(specs, host, port, token, concurrency, timeout, cache, max_tokens, threads, slots)


def _serve(
    specs: list[System],
    host: str,
    port: int,
    token: str | None,
    concurrency: int,
    timeout: float,
    cache: Path | None,
    max_tokens: int | None,
    threads: int | None,
    slots: int | None,
) -> None:
    import asyncio

    import uvicorn

    from masorch.run import Environment, EnvSpec
    from masorch.serve.app import LOOPBACK_HOSTS, ServeOptions, make_app

    env = Environment(
        EnvSpec.default(cache_path=cache, max_tokens=max_tokens, n_threads=threads, slots=slots)
    )
    hosts = LOOPBACK_HOSTS if _loopback(host) else None  # on loopback: no DNS-rebinding page gets in
    options = ServeOptions(token=token, concurrency=concurrency, timeout_s=timeout, hosts=hosts)
    app = make_app(specs, env, options)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info", lifespan="off"))
    typer.echo(f"masorch serve: {', '.join(s.name for s in specs)} on http://{host}:{port}/v1", err=True)

    async def main() -> None:
        try:
            await server.serve()
        finally:
            await env.aclose()

    asyncio.run(main())
