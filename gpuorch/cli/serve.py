"""``gpuorch serve``: the HTTP API for remote submission, in the foreground."""

from __future__ import annotations

import logging

import typer

from gpuorch.cli.app import app, cli_config, fail
from gpuorch.errors import UserInputError

SERVER_EXTRA = "pip install 'gpuorch[server]'"


@app.command()
def serve(host: str = typer.Option(None, "--host", help="Listen address (default api.host: 127.0.0.1)."),
          port: int = typer.Option(None, "--port", min=0, max=65535,
                                    help="Listen port (default api.port: 8765; 0 picks one)."),
          verbose: bool = typer.Option(False, "-v", "--verbose")) -> None:
    """Serve the HTTP API (submit, status, cancel, events, logs) and the read-only web dashboard (/ui/),
    both behind the API token.

    Example: GPUORCH_API_TOKEN=... gpuorch serve --port 8765  (dashboard: http://127.0.0.1:8765/ui/)
    """
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = cli_config()  # the global --config and the usual sources; its api section
        try:
            from gpuorch.api import server
        except ImportError as e:
            fail(f"serve: the HTTP API needs FastAPI and uvicorn ({e.name} is not installed); {SERVER_EXTRA}")
        server.serve(cfg, host, port)
    except UserInputError as e:
        fail(str(e))
