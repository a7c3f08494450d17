"""The web dashboard, served by the HTTP API under ``/ui`` (docs/dashboard.md).

``routes`` mounts the pages and the login, ``session`` signs the login cookie and the CSRF
token, ``actions`` takes the POSTs that change something (cancel, a sweep's cap, resume: through
``JobService``, as the CLI), ``data`` loads what each page shows, ``pages``, ``sweep_page`` and
``forms`` render HTML and ``svg`` draws the charts (on the server). Two assets ship in the
package under ``static/``: the stylesheet and ``live.js``, the one script (the refresh in place).
"""
