"""The baseline of ``ping_throughput.py``: a one-route no-op Litestar app.

It answers ``POST /ping/<uuid>`` with ``200 OK`` and does nothing else. The benchmark runs it
as ``python benchmarks/noop_app.py PORT [WORKERS]``: two uvicorn worker processes (or WORKERS,
one for the reference figure) started exactly as
``monitor serve --workers 2`` starts them (:func:`monitor.cli.serve.run_uvicorn`). Plain
``uvicorn noop_app:app --workers 2`` leaves ``TCP_NODELAY`` off (see ``run_uvicorn``) and
measures the 40 ms delayed ACK instead of the app (about 720 requests/s); the benchmark's
``--noop-runner uvicorn-cli`` shows it.
"""

from __future__ import annotations

from litestar import Litestar, MediaType, post


@post("/ping/{uuid:str}", status_code=200, media_type=MediaType.TEXT)
async def ping(uuid: str) -> str:
    return "OK"


app = Litestar(route_handlers=[ping])

if __name__ == "__main__":
    import sys

    from monitor.cli.serve import run_uvicorn

    run_uvicorn(
        "noop_app:app",
        factory=False,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        workers=int(sys.argv[2]) if len(sys.argv) > 2 else 2,
        log_level="warning",
    )
