// rnnviz explorable page: sliders and menus over precomputed grid points.
// Everything it draws is looked up in the page's own data (no server, no request): plotly.js
// and the data are gzip-compressed and base64-encoded in <script> elements, and decompressed
// here with the browser's DecompressionStream.
"use strict";

const SUP = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
const superscript = (n) => String(n).split("").map((c) => SUP[c]).join("");

async function gunzipText(id) {
  const b64 = document.getElementById(id).textContent.trim();
  const raw = atob(b64);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return await new Response(stream).text();
}

// Codes: integers, each the difference to the previous one within a run of finite values (the
// first of a run absolute); null for a gap (a true zero or NaN/Inf). Value = code sum × step.
function decode(codes, step) {
  const out = new Array(codes.length);
  let run = null;
  for (let i = 0; i < codes.length; i++) {
    const c = codes[i];
    if (c === null) { out[i] = null; run = null; continue; }
    run = run === null ? c : run + c;
    out[i] = run * step;
  }
  return out;
}

// Tick positions (integer exponents) and labels 10ⁿ for a log10 axis over [lo, hi]: a step of
// 1, 2 or 5 decades times a power of ten, at most maxTicks (rnnviz.charts.base.pow10_ticks).
function pow10Ticks(lo, hi, maxTicks = 8) {
  lo = Math.floor(lo); hi = Math.ceil(hi);
  const span = Math.max(hi - lo, 1);
  let step = 1;
  search: for (let p = 0; p < 12; p++) {
    for (const m of [1, 2, 5]) {
      const s = m * 10 ** p;
      if (Math.ceil(span / s) + 1 <= maxTicks) { step = s; break search; }
    }
  }
  const vals = [];
  for (let v = Math.floor(lo / step) * step; v <= Math.ceil(hi / step) * step; v += step) vals.push(v);
  return { tickvals: vals, ticktext: vals.map((v) => "10" + superscript(v)) };
}

// Within a few decades, ticks at 1, 2 and 5 (or every digit) times each power of ten too.
function logTicks(lo, hi) {
  if (hi - lo >= 3) return pow10Ticks(lo, hi);
  const digits = hi - lo < 1 ? [1, 2, 3, 4, 5, 6, 7, 8, 9] : [1, 2, 5];
  const vals = [], text = [];
  for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) {
    for (const m of digits) {
      const v = e + Math.log10(m);
      if (v >= lo && v <= hi) { vals.push(v); text.push((m === 1 ? "" : m + "×") + "10" + superscript(e)); }
    }
  }
  return { tickvals: vals, ticktext: text };
}

// [mantissa, exponent] per log10 value, for the hover text m×10ⁿ far outside float64's range.
const pow10Parts = (logs) => logs.map((l) => {
  if (l === null) return [null, null];
  const e = Math.floor(l);
  return [10 ** (l - e), e];
});

function range(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) if (v !== null && Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  return lo <= hi ? [lo, hi] : null;
}

function padded([lo, hi]) {
  const pad = Math.max((hi - lo) * 0.05, 0.25);
  return [lo - pad, hi + pad];
}

function main(data) {
  const page = data.page;
  const points = data.points;
  const controls = page.controls;
  const decoded = new Map();
  const state = controls.map((c) => c.start);

  function pointAt(index) {
    if (!decoded.has(index)) {
      const p = points[index];
      const log = (codes) => decode(codes, page.log_step);
      decoded.set(index, {
        ...p,
        grad: Object.fromEntries(Object.entries(p.grad).map(([k, v]) => [k, log(v)])),
        bound: p.bound === null ? null : log(p.bound),
        carry: Object.fromEntries(Object.entries(p.carry).map(([k, v]) => [k, log(v)])),
        units: p.units.map((u) => decode(u.codes, u.step)),
        sv: p.sv.map(log),
      });
    }
    return decoded.get(index);
  }

  function index() {
    let i = 0;
    controls.forEach((c, k) => { i = i * c.values.length + state[k]; });
    return i;
  }

  // the fixed axes: over every point of the grid, per chart
  const fixed = { grad: null, carry: null, sv: null };
  function fixedRanges() {
    const acc = { grad: [], carry: [], sv: [] };
    for (let i = 0; i < points.length; i++) {
      const p = pointAt(i);
      for (const v of Object.values(p.grad)) { const r = range(v); if (r) acc.grad.push(...r); }
      if (p.bound) { const r = range(p.bound); if (r) acc.grad.push(...r); }
      acc.grad.push(p.floor);
      for (const v of Object.values(p.carry)) { const r = range(v); if (r) acc.carry.push(...r); }
      for (const v of p.sv) { const r = range(v); if (r) acc.sv.push(...r); }
      acc.sv.push(0);
    }
    for (const k of Object.keys(acc)) { const r = range(acc[k]); fixed[k] = r ? padded(r) : null; }
  }

  const layout = (title, xTitle, yTitle) => ({
    ...page.theme,
    title: { ...(page.theme.title || {}), text: title },
    xaxis: { ...(page.theme.xaxis || {}), title: { text: xTitle } },
    yaxis: { ...(page.theme.yaxis || {}), title: { text: yTitle } },
    height: 380,
  });

  // fit.js: a title wrapped to its chart, clear of the legend
  const react = (id, traces, lay) =>
    Plotly.react(id, traces, rnnvizWrap(lay, document.getElementById(id)), page.config).then(rnnvizClear);

  function logAxis(lay, logs, fixedRange) {
    const keep = fixedRange && document.getElementById("rnnviz-fixed").checked;
    const data = range(logs);
    const r = keep ? fixedRange : data && padded(data);
    if (!r) return lay;
    lay.yaxis = { ...lay.yaxis, tickmode: "array", ...logTicks(r[0], r[1]), range: r };
    return lay;
  }

  const line = (x, y, name, colour, dash, width = 2.5) => ({
    type: "scatter", mode: "lines", x, y, name,
    line: { color: colour, dash, width },
    customdata: pow10Parts(y),
    hovertemplate: "t=%{x}<br>" + page.hover + "<extra>" + name + "</extra>",
  });

  function draw() {
    const started = performance.now();
    const i = index();
    const p = pointAt(i);
    const t = Array.from({ length: p.T + 1 }, (_, k) => k);
    const colours = page.colours;

    // 1. ‖∂L/∂carry_t‖: exact log10, the closed form, the dtype's floor
    const dashes = { total: "solid", c: "dash", h: "dot" };
    const traces = Object.entries(p.grad).map(([name, y], k) =>
      line(t, y, name, colours[0], dashes[name] || ["dashdot", "longdashdot"][k % 2]));
    if (p.bound) traces.push(line(t, p.bound, p.bound_label, "#000000", "longdash", 1.5));
    const g = logAxis(layout(page.titles.grad, "timestep t", "‖∂L/∂carry_t‖ (log scale)"),
      [...Object.values(p.grad).flat(), ...(p.bound || []), p.floor], fixed.grad);
    g.shapes = [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: p.floor, y1: p.floor,
      line: { color: "#D55E00", dash: "dot", width: 2 } }];
    g.annotations = [{ xref: "paper", x: 1, xanchor: "right", y: p.floor, yanchor: "bottom", showarrow: false,
      text: p.floor_label, font: { color: "#D55E00", size: 12 } }];
    react("rnnviz-gradients", traces, g);

    // 2. the carry in one figure (one redraw): ‖carry_t‖ per component above, the first units
    // of the output component (example 0) below, on a shared t axis
    const carry = Object.entries(p.carry).map(([name, y], k) => line(t, y, "‖" + name + "_t‖", colours[k % colours.length], "solid"));
    const units = p.units.map((y, k) => ({
      type: "scatter", mode: "lines", x: t, y, name: p.unit_label + "[" + k + "]", yaxis: "y2",
      line: { color: colours[(k + carry.length) % colours.length], width: 1.5 },
      hovertemplate: "t=%{x}<br>%{y:.4g}<extra>" + p.unit_label + "[" + k + "]</extra>",
    }));
    const c = logAxis(layout(page.titles.carry, "timestep t", "‖carry_t‖ (log scale)"),
      Object.values(p.carry).flat(), fixed.carry);
    c.height = 520;
    c.xaxis = { ...c.xaxis, anchor: "y2" };  // one t axis, under both
    c.yaxis = { ...c.yaxis, domain: [0.56, 1] };
    c.yaxis2 = { ...(page.theme.yaxis || {}), domain: [0, 0.44], anchor: "x", title: { text: p.unit_label + "_t (example 0)" } };
    react("rnnviz-carry", [...carry, ...units], c);

    // 3. the step Jacobians' top singular values, and σ = 1
    const sv = p.sv.map((y, k) => ({ ...line(p.steps, y, "σ" + (k + 1), colours[k % colours.length], "solid", 2),
      hovertemplate: "t=%{x}<br>" + page.hover + "<extra>σ" + (k + 1) + "</extra>" }));
    const j = logAxis(layout(page.titles.sv + " — λ₁ = " + p.lambda1_text, "timestep t", "σᵢ(J_t) (log scale)"),
      [...p.sv.flat(), 0], fixed.sv);
    j.shapes = [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 0, y1: 0, line: { color: "#777777", dash: "dash", width: 1 } }];
    react("rnnviz-jacobians", sv, j);

    document.getElementById("rnnviz-verdict").textContent = p.verdict;
    document.getElementById("rnnviz-numbers").textContent = p.numbers;
    controls.forEach((c, k) => {
      const value = document.getElementById("rnnviz-value-" + k);
      if (value) value.textContent = c.text[state[k]];  // a menu shows its own choice
    });
    const root = document.getElementById("rnnviz-app");
    root.dataset.point = String(i);
    window.rnnviz.lastRedrawMs = performance.now() - started;
    window.rnnviz.redraws += 1;
  }

  // the controls: a slider per numeric field, a menu per named one
  const box = document.getElementById("rnnviz-controls");
  controls.forEach((c, k) => {
    const row = document.createElement("label");
    row.className = "control";
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = c.label;
    name.title = c.help;
    row.appendChild(name);
    let input;
    if (c.kind === "menu") {
      input = document.createElement("select");
      c.text.forEach((text, v) => {
        const o = document.createElement("option");
        o.value = String(v);
        o.textContent = text;
        input.appendChild(o);
      });
    } else {
      input = document.createElement("input");
      input.type = "range";
      input.min = "0";
      input.max = String(c.values.length - 1);
      input.step = "1";
    }
    input.id = "rnnviz-control-" + k;
    input.dataset.field = c.name;
    input.value = String(c.start);
    input.addEventListener("input", () => { state[k] = Number(input.value); draw(); });
    row.appendChild(input);
    if (c.kind !== "menu") {
      const value = document.createElement("span");
      value.className = "value";
      value.id = "rnnviz-value-" + k;
      row.appendChild(value);
    }
    box.appendChild(row);
  });
  document.getElementById("rnnviz-fixed").addEventListener("change", draw);
  let resized = null;  // a phone turned, a window narrowed: the titles wrapped again
  window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(draw, 150); });

  window.rnnviz = {
    redraws: 0,
    lastRedrawMs: null,
    index,
    point: pointAt,
    set(field, valueIndex) {
      const k = controls.findIndex((c) => c.name === field);
      state[k] = valueIndex;
      document.getElementById("rnnviz-control-" + k).value = String(valueIndex);
      draw();
    },
  };
  fixedRanges();
  draw();
  document.getElementById("rnnviz-app").dataset.ready = "1";
}

async function start() {
  const root = document.getElementById("rnnviz-app");
  if (typeof DecompressionStream === "undefined") {
    root.dataset.ready = "error";
    document.getElementById("rnnviz-verdict").textContent =
      "This page needs a browser from 2023 or later (Chrome 80, Edge 80, Firefox 113, Safari 16.4).";
    return;
  }
  const plotly = document.createElement("script");
  plotly.textContent = await gunzipText("rnnviz-plotly-gz");
  document.head.appendChild(plotly);
  main(JSON.parse(await gunzipText("rnnviz-data-gz")));
}

start().catch((err) => {
  document.getElementById("rnnviz-app").dataset.ready = "error";
  document.getElementById("rnnviz-verdict").textContent = "The page could not start: " + err;
  throw err;
});
