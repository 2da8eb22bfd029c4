"""``masorch serve``: systems as models behind an OpenAI-compatible endpoint (docs/serve.md)."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from masorch.cli._options import MAX_CONCURRENCY, Ctx, PriceFiles, PriceFlags, Slots, Threads
from masorch.errors import UsageError, require_extra
from masorch.listen import LOOPBACK_HOSTS, bind_sockets, check_host, is_loopback, url_host
from masorch.redact import redact
from masorch.run.system import System

if TYPE_CHECKING:
    from masorch.run import EnvSpec
    from masorch.serve.app import ServeOptions

logger = logging.getLogger(__name__)

#: The environment variable a bearer token may come from (so it stays out of shell history).
TOKEN_ENV = "MASORCH_SERVE_TOKEN"


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
        concurrency: int = typer.Option(
            4, "--concurrency", min=1, max=MAX_CONCURRENCY, help="Runs at once; more requests wait."
        ),
        max_waiting: int = typer.Option(
            64, "--max-waiting", min=0, help="Requests that may wait for a run; more get 503."
        ),
        timeout: float = typer.Option(
            1800.0, "--timeout", min=1, help="Deadline of one request, its wait included (seconds)."
        ),
        read_timeout: float = typer.Option(
            30.0, "--read-timeout", min=0.1, help="Seconds a client has to send a whole request."
        ),
        cache: Path | None = typer.Option(  # noqa: B008
            None, "--cache", help="Record/replay cache of every call (SQLite)."
        ),
        max_tokens: int | None = typer.Option(
            None, "--max-tokens", min=16, help="Cap of each sub-agent call."
        ),
        agent_profile: str = typer.Option(
            "default",
            "--agents",
            help="Agent profile: default, or paper (the official MAS-Orchestra agents).",
        ),
        threads: Threads = None,
        slots: Slots = None,
        ctx: Ctx = None,
        prices: PriceFiles = [],  # noqa: B006
        price: PriceFlags = [],  # noqa: B006
    ) -> None:
        """Serve systems as models: POST /v1/chat/completions with model=SYSTEM, GET /v1/models."""
        require_extra("starlette", "serve")
        require_extra("uvicorn", "serve")
        token = (token or os.environ.get(TOKEN_ENV) or "").strip() or None  # blank: no token
        check_host(host, port)  # a --host that is no address is not "beyond this machine"
        if not is_loopback(host) and token is None:
            raise UsageError(
                f"--host {host} serves beyond this machine without a token",
                hint=f"set --token or ${TOKEN_ENV}, or bind 127.0.0.1",
            )
        from masorch.agents.signatures import agent_profile_name
        from masorch.eval.systems import check_systems, systems_from_flags

        profile = agent_profile_name(agent_profile)
        defaults = {"model": model, "orchestrator": orchestrator}
        specs = systems_from_flags(systems, config, {k: v for k, v in defaults.items() if v is not None})
        # A bad model string would fail every request, one 502 after another.
        check_systems(specs, agent_profile=profile)
        from masorch.backends.prices import PricedFactory, price_table
        from masorch.run import EnvSpec
        from masorch.serve.app import ServeOptions

        env_spec = EnvSpec.default(
            cache_path=cache,
            max_tokens=max_tokens,
            n_threads=threads,
            slots=slots,
            n_ctx=ctx,
            agent_profile=profile,
        )
        table = price_table(files=prices, flags=price, config=config)
        env_spec = dataclasses.replace(
            env_spec, backend_factory=PricedFactory(env_spec.backend_factory, table)
        )

        options = ServeOptions(
            token=token,
            concurrency=concurrency,
            timeout_s=timeout,
            max_waiting=max_waiting,
            read_timeout_s=read_timeout,
            # on loopback: no DNS-rebinding page gets in
            hosts=(*LOOPBACK_HOSTS, host.strip("[]")) if is_loopback(host) else None,
        )
        _serve(specs, host, port, options, env_spec)


class _Terminated(SystemExit):
    """SIGTERM, raised where uvicorn re-sends it once it has stopped, so the models are closed."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated(128 + signum)


def _serve(specs: list[System], host: str, port: int, options: ServeOptions, env_spec: EnvSpec) -> None:
    import asyncio

    import uvicorn

    from masorch.run import Environment
    from masorch.serve.app import make_app
    from masorch.serve.http import uvicorn_config

    # Bound here, before the "serving" line: a busy port or a host that is not this machine's is a
    # usage error naming the flag, not uvicorn's bare "[Errno 98]" after it.
    sockets = bind_sockets(host, port)
    env = Environment(env_spec)
    serving = False
    try:
        # A single agent this server cannot offer (search: serve has no corpus) fails every request.
        for system in (s for s in specs if s.is_sas):
            env.sas_plan(system, retriever=False)
        # Every model now: a missing API key is a usage error here, not a 502 on each request.
        env.build_backends(m for s in specs for m in s.model_strings())
        app = make_app(specs, env, options)
        server = uvicorn.Server(uvicorn_config(app, host, port, options))
        where = f"{url_host(host)}:{sockets[0].getsockname()[1]}"  # the port --port 0 was given
        typer.echo(f"masorch serve: {', '.join(s.name for s in specs)} on http://{where}/v1", err=True)

        async def main() -> None:
            try:
                await server.serve(sockets=sockets)
            finally:  # Ctrl-C and SIGTERM land here too: the embedded model servers are stopped
                await env.aclose()

        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            serving = True  # from here main() closes the models
            asyncio.run(main())
        finally:
            signal.signal(signal.SIGTERM, previous)
    finally:
        for sock in sockets:
            sock.close()
        if not serving:  # stopped before serving: close what was built, keeping the first error
            try:
                asyncio.run(env.aclose())
            except Exception as exc:
                logger.warning("closing the models failed: %s", redact(str(exc)))
