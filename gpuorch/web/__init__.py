"""The read-only web dashboard, served by the HTTP API under ``/ui`` (docs/dashboard.md).

``routes`` mounts the pages and the login, ``session`` signs the login cookie, ``data`` loads
what each page shows, ``pages`` renders HTML and ``svg`` draws the charts (on the server: no
script, no assets beyond one stylesheet, which ships in the package under ``static/``).
"""
