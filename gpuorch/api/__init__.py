"""The optional HTTP API for remote submission (extra ``server``: FastAPI + uvicorn).

``server`` builds and runs the app (imported only by ``gpuorch serve`` and a daemon with
``api.enabled``); ``client`` is the stdlib-only client behind ``gpuorch --server URL``; ``auth``
and ``upload`` are shared by both and need nothing beyond the standard library. Nothing is
imported here, so the CLI never pays for FastAPI.
"""
