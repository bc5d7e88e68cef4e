"""Warm the dashboard before anyone asks: once the server answers, run its page once.

Streamlit's script health check (``/_stcore/script-health-check``) runs the page in a
headless session: the imports, the worker processes and the default analysis, whose result
stays in the shared result cache. ``rnnviz app`` starts :func:`main` beside the server, and
``streamlit run app.py`` runs :func:`warm_and_report` in a thread of it (:mod:`rnnviz.ui.lifespan`).
"""

from __future__ import annotations

import logging
import sys
import time
import urllib.error
import urllib.request

log = logging.getLogger("rnnviz.serve.warm")

#: The two endpoints, below the server's base URL.
HEALTH, PAGE = "_stcore/health", "_stcore/script-health-check"
#: Requests for the page: one that Streamlit stopped at its 60 s has still left its
#: computations in the server's caches, so the next is quick.
TRIES = 3


def base_url(address: str, port: int | str, base_path: str) -> str:
    """Where a Streamlit server with these settings answers on this machine: on 127.0.0.1
    when it listens on every interface (``server.address``, ``server.port``,
    ``server.baseUrlPath``).

    Example:
        >>> base_url("0.0.0.0", 8501, "/rnnviz/")
        'http://127.0.0.1:8501/rnnviz/'
        >>> base_url("::1", 9000, "")
        'http://[::1]:9000/'
    """
    if address in ("", "0.0.0.0", "::"):
        address = "127.0.0.1"
    elif ":" in address:  # an IPv6 address goes in brackets in a URL
        address = f"[{address}]"
    base = base_path.strip("/")
    return f"http://{address}:{port}/" + (f"{base}/" if base else "")


def _get(url: str, timeout_s: float) -> tuple[int, str]:
    """``(HTTP status, body)`` of a GET; ``(0, why)`` when nothing answered."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # only our own server
            return answer.status, answer.read(200).decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read(200).decode(errors="replace")
    except (OSError, ValueError) as err:
        return 0, str(err)


def warm(base_url: str, start_within_s: float = 60.0, run_within_s: float = 120.0) -> tuple[bool, str]:
    """Wait for the server at ``base_url`` to answer its health check, then have it run its
    page once; ``(whether the page ran without an error, what happened)``.

    Args:
        base_url: the server's address with its base path, e.g. ``http://127.0.0.1:8501/``.
        start_within_s: seconds the server may take to answer its health check.
        run_within_s: seconds the page's run may take (Streamlit gives it 60).

    Example:
        >>> warm("http://127.0.0.1:9/", start_within_s=0.2)  # nothing listens on port 9
        (False, 'the server at http://127.0.0.1:9/ did not answer within 0.2 s')
    """
    base = base_url if base_url.endswith("/") else base_url + "/"
    deadline = time.monotonic() + start_within_s
    while True:
        status, _ = _get(base + HEALTH, timeout_s=2.0)
        if status == 200:
            break
        if time.monotonic() >= deadline:
            return False, f"the server at {base} did not answer within {start_within_s:g} s"
        time.sleep(0.2)
    began = time.perf_counter()
    for _ in range(TRIES):  # Streamlit gives one run 60 s: on a loaded machine the next finds it done
        status, body = _get(base + PAGE, timeout_s=run_within_s)
        if status in (200, 404):
            break
    took = time.perf_counter() - began
    if status == 200:
        return True, f"the page ran in {took:.1f} s: its imports, workers and default analysis are ready"
    if status == 404:
        return False, "the server's script health check is off (server.scriptHealthCheckEnabled)"
    return False, f"the page's warm-up run ended with HTTP {status or 'no answer'} after {took:.1f} s: {body}"


def warm_and_report(base_url: str) -> bool:
    """:func:`warm` the server at ``base_url`` and say how it went on stderr, in the server's
    log (``rnnviz: warm-up: …``); whether the page ran without an error."""
    ok, what = warm(base_url)
    print(f"rnnviz: warm-up: {what}", file=sys.stderr, flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    """``python -m rnnviz.serve.warm URL``: warm the server at URL; the outcome goes to stderr."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rnnviz.serve.warm URL", file=sys.stderr)
        return 2
    return 0 if warm_and_report(args[0]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
