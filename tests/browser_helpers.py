"""What every browser test and script shares: Debian's chromium, its flags, and a script of
``scripts/`` loaded as a module. Plain Python (no Playwright, no Streamlit): the scripts put
``tests/`` on their path and import it too."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
#: Debian's chromium (never ``playwright install``: this machine reaches no download site).
CHROMIUM = "/usr/bin/chromium"
#: A chart of the page's main part (the sidebar holds a hidden empty one that has Streamlit
#: load Plotly early, :func:`rnnviz.ui.page.title`, and the data preview's).
CHART = '[data-testid="stMain"] [data-testid="stPlotlyChart"] .js-plotly-plot'
#: In a container as root (no sandbox), without a GPU, and quiet on the network.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

#: How often a test's or the soak's wait reads the page, in ms. Playwright's default reads it
#: on every animation frame, which keeps a headless chromium producing frames: 0.03–0.05 of a
#: core per waiting page, against 0.003 at this interval (an idle dashboard page, measured).
#: The timing scripts (scripts/measure_app.py, page_open.py) keep the default, for its 16 ms.
POLL_MS = 50
#: An init script that follows the script runs a page sees, from the server's own messages:
#: each binary websocket frame is one Streamlit ``ForwardMsg``. Its top-level field 4
#: (``new_session``) begins a run (a fragment's too), field 6 (``script_finished``) ends one,
#: and field 9 (``session_status_changed``, a ``SessionStatus`` whose field 2 is
#: ``script_is_running``, absent when false) says whether the session is running now: sent at
#: every change, it is the signal a wait ends on (a soak with faults saw a run begun and its
#: ``script_finished`` never seen, the session idle). It reads the frames, not the app root's
#: ``data-test-script-state``: React renders several messages handled in one go as one
#: update, so a short run under load never shows "running" in the page (a soak in CI waited
#: 60 s for one that had come and gone). ``window.__runs`` holds ``runs`` (begun), ``ended``,
#: ``running``, ``pending`` (a run begun, no word from the server since) and ``trail`` (the
#: last dozen of these messages, for a failure's message); a fresh page has seen no run, so
#: its "notRunning" before the first run is not taken for a finished one. It also keeps the
#: Streamlit session the page is in (``session``: ``new_session.initialize.session_id``,
#: field 1 then 6), how many distinct ones it has seen (``sessions``) and the websockets it
#: opened (``sockets``): a page whose connection dropped and came back in a new session has
#: lost its session state (its pins).
RUN_COUNTER = """(() => {
  const s = (window.__runs = {
    runs: 0, ended: 0, running: false, pending: false, session: "", sessions: 0, sockets: 0, trail: [] });
  const mark = (what) => { s.trail.push(what); if (s.trail.length > 12) s.trail.shift(); };
  const text = new TextDecoder();
  const varint = (b, i) => {
    let v = 0, m = 1, c;
    do { c = b[i++]; v += (c & 127) * m; m *= 128; } while (c & 128 && i < b.length);
    return [v, i];
  };
  const fields = (b, i, end, each) => {  // each(field, wire, value or [start, end]) per field
    let tag, n;
    while (i < end) {
      [tag, i] = varint(b, i);
      const field = Math.floor(tag / 8), wire = tag & 7;
      if (wire === 0) { [n, i] = varint(b, i); each(field, wire, n); }
      else if (wire === 2) { [n, i] = varint(b, i); each(field, wire, [i, i + n]); i += n; }
      else if (wire === 1) i += 8;
      else if (wire === 5) i += 4;
      else return;
    }
  };
  const count = (data) => {
    if (!(data instanceof ArrayBuffer)) return;
    const b = new Uint8Array(data);
    fields(b, 0, b.length, (field, wire, v) => {
      if (field === 4) {
        s.runs += 1;
        s.pending = true;  // begun: not settled before the server has said it runs, or it ended
        mark("begin");
        fields(b, v[0], v[1], (f, w, init) => {
          if (f !== 1 || w !== 2) return;
          fields(b, init[0], init[1], (g, x, id) => {
            if (g !== 6 || x !== 2) return;
            const sid = text.decode(b.subarray(id[0], id[1]));
            if (sid && sid !== s.session) { s.session = sid; s.sessions += 1; }
          });
        });
      }
      if (field === 6) { s.ended += 1; s.pending = false; mark("end"); }
      if (field === 9 && wire === 2) {
        let running = false;
        fields(b, v[0], v[1], (f, w, x) => { if (f === 2 && w === 0) running = x !== 0; });
        s.running = running;
        s.pending = false;  // the server's word on the run begun last
        mark(running ? "running" : "idle");
      }
    });
  };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      s.sockets += 1;
      this.addEventListener("message", (e) => count(e.data));
    }
  };
})();"""
#: JavaScript: the runs begun so far (0 before the counter runs).
RUNS = "() => (window.__runs ? window.__runs.runs : 0)"
#: JavaScript predicate of ``n``: a run begun after the page had seen ``n``, the session not
#: running now (the server said so after that run began, or the run ended), and the page
#: showing it idle. Streamlit sends a run's ``new_session`` and then, in another frame, its
#: ``session_status_changed``: between the two the last status still says "not running"
#: and the page still shows idle, and a wait without ``pending`` ended there (a tab timed at
#: 0.1 s, its run just begun).
SETTLED = """n => !!window.__runs && window.__runs.runs > n && !window.__runs.running
  && !window.__runs.pending && !!document.querySelector('[data-test-script-state="notRunning"]')"""
#: What the page shows when something went wrong: a traceback or an error box.
PROBLEMS = '[data-testid="stException"], [data-testid="stAlertContentError"]'
#: JavaScript: where a page is, for a failure message: the runs it saw begin and end, its
#: script state, its session, its selected tab and its address.
WHERE = """() => {
  const r = window.__runs || {};
  const root = document.querySelector("[data-test-script-state]");
  const state = root && root.getAttribute("data-test-script-state");
  const tab = document.querySelector("[role=tab][aria-selected=true]");
  return `runs begun ${r.runs}, ended ${r.ended}, server says running ${r.running}, state ${state}, `
    + `session ${r.session} (${r.sessions} seen on ${r.sockets} websockets), `
    + `selected tab ${tab && tab.textContent}, at ${location.href}; `
    + `last messages ${(r.trail || []).join(" ")}`;
}"""
#: JavaScript: resolves after two animation frames, by when React has drawn what the
#: messages already handled asked for (or after 0.5 s, should a page get no frames).
FRAMES = """() => new Promise((r) => {
  requestAnimationFrame(() => requestAnimationFrame(() => r(true)));
  setTimeout(() => r(true), 500);
})"""


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module (``scripts/`` is no package); registered under its
    name first, so the dataclasses in it can look their module up."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def open_offline(browser, path: Path, **options) -> tuple:
    """A saved page opened from ``file://`` in a fresh context that is offline and lets only
    ``file://`` requests through: ``(context, page, the requests it aborted, the console's
    errors)``, the two lists filled as the page runs. ``options`` go to ``browser.new_context``."""
    context = browser.new_context(**options)
    context.set_offline(True)
    aborted, errors = [], []

    def only_files(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            aborted.append(route.request.url)
            route.abort()

    context.route("**/*", only_files)
    page = context.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri(), wait_until="load")
    return context, page, aborted, errors


#: Every drawn chart whose title runs past its edges (cut), whose legend lies over its title
#: (covered), or whose drawing runs out of the box that holds it, over what follows (spills):
#: what ``rnnviz/report/fit.js`` prevents where Plotly does not.
TITLES_CLEAR = """() => {
  const out = {cut: [], covered: [], spills: []};
  for (const el of document.querySelectorAll('.js-plotly-plot')) {
    const title = el.querySelector('.gtitle'), svg = el.querySelector('svg.main-svg');
    if (!title || !svg) continue;
    const box = el.getBoundingClientRect(), t = title.getBoundingClientRect();
    if (t.right > box.right + 1 || t.left < box.left - 1) out.cut.push(el.id);
    const meets = e => t.bottom > e.top && t.top < e.bottom && t.left < e.right && e.left < t.right;
    if ([...el.querySelectorAll('.legend .traces')].map(n => n.getBoundingClientRect()).some(meets))
      out.covered.push(el.id);
    if (svg.getBoundingClientRect().bottom > el.parentElement.getBoundingClientRect().bottom + 1)
      out.spills.push(el.id);
  }
  return out;
}"""
CLEAR = {"cut": [], "covered": [], "spills": []}


def plots_offline(
    browser, path: Path, figures: int, per_plot: str, **options
) -> tuple[list, dict, list, list]:
    """:func:`open_offline`, then ``(what the script ``per_plot`` returns once ``figures``
    Plotly figures have drawn and been fitted, :data:`TITLES_CLEAR` then, the requests it
    aborted, the console's errors)``."""
    context, page, aborted, errors = open_offline(browser, path, **options)
    page.wait_for_function(
        "n => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.querySelector('svg.main-svg'))"
        ".length === n",
        arg=figures,
        timeout=60_000,
    )
    page.wait_for_function("document.body.dataset.fitted === '1'", timeout=30_000)  # fit.js is done
    plots, clear = page.evaluate(per_plot), page.evaluate(TITLES_CLEAR)
    context.close()
    return plots, clear, aborted, errors
