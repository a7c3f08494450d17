"""``gpuorch serve``: the HTTP API for remote submission, in the foreground."""

from __future__ import annotations

import logging
from pathlib import Path

import typer

from ..errors import UserInputError
from .app import app, fail

SERVER_EXTRA = "pip install 'gpuorch[server]'"


@app.command()
def serve(config: Path = typer.Option(None, "--config", help="Daemon configuration (YAML); its api section."),
          host: str = typer.Option(None, "--host", help="Listen address (default api.host: 127.0.0.1)."),
          port: int = typer.Option(None, "--port", help="Listen port (default api.port: 8765; 0 picks one)."),
          verbose: bool = typer.Option(False, "-v", "--verbose")) -> None:
    """Serve the HTTP API (submit, status, cancel, events, logs) with token authentication."""
    from ..config import load_config

    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        cfg = load_config(config)
        try:
            from ..api import server
        except ImportError as e:
            fail(f"serve: the HTTP API needs FastAPI and uvicorn ({e.name} is not installed); {SERVER_EXTRA}")
        server.serve(cfg, host, port)
    except UserInputError as e:
        fail(str(e))
