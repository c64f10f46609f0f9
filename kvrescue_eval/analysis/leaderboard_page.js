// The leaderboard page: sorting, filters and the two Pareto plots, from the rows embedded in the page.
// No network, no library: written by `kvrescue-eval leaderboard build` (kvrescue_eval/analysis/leaderboard_page.py).
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("leaderboard-data").textContent);
  const rows = data.rows;
  const body = document.querySelector("#leaderboard tbody");
  const trs = Array.from(body.querySelectorAll("tr"));
  const state = {key: "avg", descending: true};
  const SVG = "http://www.w3.org/2000/svg";
  const MODE_SHAPES = {rescue: "circle", bon: "square", full: "triangle", helper: "diamond"};

  function value(row, key) {
    if (key in row.benchmarks) return row.benchmarks[key];
    if (data.benchmarks.includes(key)) return null;
    return row[key];
  }

  function compare(a, b) {
    const x = value(a, state.key), y = value(b, state.key);
    if (x === null || x === undefined) return (y === null || y === undefined) ? a.order - b.order : 1;
    if (y === null || y === undefined) return -1;
    const order = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
    return (state.descending ? -order : order) || a.order - b.order;
  }

  function visible(row) {
    for (const select of document.querySelectorAll("select[data-filter]")) {
      const wanted = select.value;
      if (wanted !== "" && String(row[select.dataset.filter]) !== wanted) return false;
    }
    if (!document.getElementById("show-reference").checked && row.source === "reference") return false;
    if (document.getElementById("comparable-only").checked && !row.ranked) return false;
    return true;
  }

  function render() {
    const shown = rows.filter(visible).sort(compare);
    const ids = new Set(shown.map((row) => row.order));
    for (const tr of trs) tr.hidden = !ids.has(Number(tr.dataset.order));
    for (const row of shown) body.appendChild(trs[row.order]);
    for (const th of document.querySelectorAll("#leaderboard th[data-key]")) {
      th.setAttribute("aria-sort", th.dataset.key === state.key ? (state.descending ? "descending" : "ascending") : "none");
    }
    document.getElementById("shown").textContent = `${shown.length} of ${rows.length} rows`;
    plot("plot-memory", shown, "kv_kib_per_token", true);
    plot("plot-tokens", shown, "base_tokens", false);
  }

  function element(name, attributes, parent, text) {
    const node = document.createElementNS(SVG, name);
    for (const [key, val] of Object.entries(attributes)) node.setAttribute(key, val);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function marker(parent, shape, x, y, colour, hollow) {
    const size = 5;
    const style = {fill: hollow ? "white" : colour, stroke: colour, "stroke-width": 1.6};
    if (shape === "circle") return element("circle", {cx: x, cy: y, r: size, ...style}, parent);
    if (shape === "square") return element("rect", {x: x - size, y: y - size, width: 2 * size, height: 2 * size, ...style}, parent);
    const points = shape === "triangle"
      ? [[x, y - size - 1], [x + size + 1, y + size], [x - size - 1, y + size]]
      : [[x, y - size - 1], [x + size + 1, y], [x, y + size + 1], [x - size - 1, y]];
    return element("polygon", {points: points.map((p) => p.join(",")).join(" "), ...style}, parent);
  }

  function ticks(low, high, log) {
    if (log) {
      const out = [];
      for (let e = Math.floor(Math.log10(low)); e <= Math.ceil(Math.log10(high)); e++) {
        for (const m of [1, 2, 5]) { const t = m * 10 ** e; if (t >= low && t <= high) out.push(t); }
      }
      return out.length >= 2 ? out : [low, high];
    }
    const step = 10 ** Math.floor(Math.log10((high - low) / 4 || 1));
    const unit = [1, 2, 5, 10].map((m) => m * step).find((s) => (high - low) / s <= 6) || step * 10;
    const out = [];
    for (let t = Math.ceil(low / unit) * unit; t <= high + 1e-9; t += unit) out.push(Number(t.toPrecision(6)));
    return out;
  }

  function padded(low, high, log) {
    // an axis is never a single point: widen a zero or tiny range around it
    if (log) return high / low < 2 ? [low / 1.5, high * 1.5] : [low / 1.15, high * 1.15];
    const span = high - low || Math.max(Math.abs(high) * 0.2, 1);
    return [low - span * 0.08, high + span * 0.08];
  }

  function pareto(points) {
    // best accuracy for its cost: no other point is cheaper (or as cheap) and at least as accurate
    const sorted = points.slice().sort((a, b) => a.x - b.x || b.y - a.y);
    const front = [];
    for (const p of sorted) if (!front.length || p.y > front[front.length - 1].y) front.push(p);
    return front;
  }

  function plot(id, shown, key, log) {
    const svg = document.getElementById(id);
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const width = 520, height = 330, left = 58, right = 16, top = 34, bottom = 46;
    element("text", {x: width / 2, y: 18, "text-anchor": "middle", class: "plot-title"}, svg, svg.dataset.title);
    // one marker for rows that are the same point (the paper's helper-alone row sits in its 7B and 72B blocks)
    const byPoint = new Map();
    for (const row of shown) {
      if (typeof row[key] !== "number" || !(row[key] > 0) || typeof row.avg !== "number") continue;
      const id = [row.model, row.mode, row.source, row[key], row.avg].join("|");
      if (byPoint.has(id)) byPoint.get(id).names.push(row.name);
      else byPoint.set(id, {x: row[key], y: 100 * row.avg, row: row, names: [row.name]});
    }
    const points = Array.from(byPoint.values());
    svg.dataset.points = String(points.length);
    if (!points.length) {
      element("text", {x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty"}, svg, svg.dataset.empty);
      return;
    }
    const [x0, x1] = padded(Math.min(...points.map((p) => p.x)), Math.max(...points.map((p) => p.x)), log);
    const [y0, y1] = padded(Math.min(...points.map((p) => p.y)), Math.max(...points.map((p) => p.y)), false);
    const sx = (x) => left + (width - left - right) * (log ? Math.log(x / x0) / Math.log(x1 / x0) : (x - x0) / (x1 - x0));
    const sy = (y) => height - bottom - (height - top - bottom) * (y - y0) / (y1 - y0);
    const axes = element("g", {class: "axes"}, svg);
    element("rect", {x: left, y: top, width: width - left - right, height: height - top - bottom, class: "frame"}, axes);
    for (const t of ticks(x0, x1, log)) {
      element("line", {x1: sx(t), x2: sx(t), y1: top, y2: height - bottom, class: "grid"}, axes);
      element("text", {x: sx(t), y: height - bottom + 15, "text-anchor": "middle"}, axes, t.toLocaleString("en-US"));
    }
    for (const t of ticks(y0, y1, false)) {
      element("line", {x1: left, x2: width - right, y1: sy(t), y2: sy(t), class: "grid"}, axes);
      element("text", {x: left - 6, y: sy(t) + 4, "text-anchor": "end"}, axes, String(t));
    }
    element("text", {x: (left + width - right) / 2, y: height - 8, "text-anchor": "middle", class: "label"}, axes, svg.dataset.xlabel);
    element("text", {x: 14, y: (top + height - bottom) / 2, "text-anchor": "middle", class: "label",
      transform: `rotate(-90 14 ${(top + height - bottom) / 2})`}, axes, "mean pass@1 (%)");
    const front = pareto(points);
    element("polyline", {points: front.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" "), class: "pareto"}, svg);
    const layer = element("g", {class: "points"}, svg);
    for (const p of points) {
      const node = marker(layer, MODE_SHAPES[p.row.mode] || "circle", sx(p.x), sy(p.y), data.colours[p.row.model],
                          p.row.source === "reference");
      node.setAttribute("class", "point" + (front.includes(p) ? " on-front" : ""));
      element("title", {}, node, `${p.names.join(", ")}: ${p.y.toFixed(1)}% at ${p.x.toLocaleString("en-US")} ${svg.dataset.unit}`);
    }
  }

  for (const th of document.querySelectorAll("#leaderboard th[data-key]")) {
    th.addEventListener("click", () => {
      state.descending = state.key === th.dataset.key ? !state.descending : th.dataset.numeric === "true";
      state.key = th.dataset.key;
      render();
    });
  }
  for (const control of document.querySelectorAll("select[data-filter], input[type=checkbox]")) {
    control.addEventListener("change", render);
  }
  render();
  document.body.dataset.ready = "true";
})();
