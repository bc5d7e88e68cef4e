// Titles and legends of charts narrower than their text: shared by the teaching pages
// (explorable.js) and the comparison reports (rnnviz.report.html), both offline pages.
//
// Plotly neither wraps a title to its chart's width (it runs off the chart) nor keeps a legend
// that wraps onto more rows off the title (the rows grow up over it). rnnvizWrap breaks a title
// too long for its chart at spaces, from an estimate of its glyphs (an average glyph is about
// GLYPH of the font size; Plotly's title font is 1.4 times the layout's), and sets every title
// at the chart's top. Once drawn, rnnvizClear measures what the title still lacks (Plotly lifts
// a title of several lines above its anchor) and the room the legend needs under it, gives both
// in one relayout (the plot keeps its height), and keeps them on the chart for its next draws
// at that width.
(function () {
  const GLYPH = 0.58, GAP_PX = 4;

  function wrapWords(text, perLine) {
    const lines = [];
    for (const word of text.split(" ")) {
      const last = lines.length - 1;
      if (last >= 0 && (lines[last] + " " + word).length <= perLine) lines[last] += " " + word;
      else lines.push(word);
    }
    return lines.join("<br>");
  }

  // lay: a layout about to be drawn in el. Returns it with the title wrapped and at the top,
  // and the room measured on el's last draw at this width.
  window.rnnvizWrap = function (lay, el) {
    const width = el.clientWidth, title = lay.title || {};
    if (!width || !title.text) return lay;
    const size = (title.font && title.font.size) || 1.4 * ((lay.font && lay.font.size) || 13);
    const perLine = Math.max(10, Math.floor((width - 30) / (GLYPH * size)));
    const room = el.rnnvizRoom && el.rnnvizRoom.width === width ? el.rnnvizRoom : { pad: GAP_PX, top: 0 };
    const margin = (lay.margin && lay.margin.t) || 80, top = Math.max(margin, room.top);
    return {
      ...lay,
      title: { ...title, text: wrapWords(title.text.replace(/<br>/g, " "), perLine),
        yref: "container", y: 1, yanchor: "top", pad: { ...(title.pad || {}), t: room.pad } },
      margin: { ...(lay.margin || {}), t: top },
      height: (lay.height || 450) + top - margin,
    };
  };

  // el: a drawn chart. Returns the relayouts' promise, or nothing when the title is clear.
  // A legend that Plotly had cut to the room it had (and scrolls) takes more rows once given
  // more: measured again, at most a few times.
  window.rnnvizClear = function (el, tries = 3) {
    const title = el.querySelector(".gtitle");
    if (!title || !el._fullLayout) return;
    const box = el.getBoundingClientRect(), t = title.getBoundingClientRect();
    const lift = Math.max(0, box.top + GAP_PX - t.top);
    // the legend's entries: its box has padding above them
    const entries = [...el.querySelectorAll(".legend .traces")].map((n) => n.getBoundingClientRect().top);
    const overlap = entries.length ? Math.max(0, t.bottom + lift + GAP_PX - Math.min(...entries)) : 0;
    if (lift < 1 && overlap < 1) return;
    // from the margin as drawn (a legend above the plot pushes it past the layout's own);
    // autosize named again, as a relayout that names the height alone fixes the width it has now
    const margin = (el.layout.margin || {}).t || 0;
    const drawn = Math.max(margin, (el._fullLayout._size || {}).t || 0);
    const pad = ((el.layout.title.pad || {}).t || 0) + lift, top = drawn + overlap;
    const height = (el.layout.height || el._fullLayout.height) + top - margin;
    el.rnnvizRoom = { width: el.clientWidth, pad, top };
    for (const holder of [el.parentElement, el]) {  // boxes of a fixed height (plotly's own wrapper) grow with it
      if (holder && holder.clientHeight && holder.clientHeight < height) holder.style.height = height + "px";
    }
    return Plotly.relayout(el, { "title.pad.t": pad, "margin.t": top, height, autosize: true })
      .then(() => (tries > 1 ? rnnvizClear(el, tries - 1) : undefined));
  };

  // Every chart of a page drawn by its own Plotly.newPlot (a report): fitted once drawn, and
  // again when the window's width changes; the body's data-fitted counts the fits done.
  window.rnnvizFitAll = function () {
    let fits = 0;
    const fit = () => Promise.all([...document.querySelectorAll(".plotly-graph-div")].map((el) => {
      if (!el._fullLayout || !el.layout.title) return null;
      const l = el.layout;  // as first drawn: each fit starts from it
      const base = (el.rnnvizBase = el.rnnvizBase ||
        { text: l.title.text, top: (l.margin || {}).t, height: l.height || el._fullLayout.height });
      const lay = rnnvizWrap({ ...l, title: { ...l.title, text: base.text }, margin: { ...(l.margin || {}), t: base.top },
        height: base.height }, el);
      return Plotly.relayout(el, { title: lay.title, "margin.t": lay.margin.t, height: lay.height, autosize: true })
        .then(() => rnnvizClear(el));
    })).then(() => { document.body.dataset.fitted = String(++fits); });
    let resized = null;
    window.addEventListener("resize", () => { clearTimeout(resized); resized = setTimeout(fit, 150); });
    fit();
  };
})();
