"""The charts while runs compute: a small component that asks the server for new records and the
latest picture of each model (:mod:`krr_app.jobs.live_api`) and draws them, without rerunning the
page. When a run ends it asks for one page rerun, which draws the finished runs with plotly
(:func:`krr_app.charts.figures.convergence_figure`: same panels, titles and colours).

The panel contract
------------------
The page passes the runs and a list of panels, plain JSON-able dicts, each with a ``kind``:

* ``{"kind": "convergence", "runs": [ids], "x", "x_title", "residual_title", "metric_names",
  "columns"}`` (:func:`convergence_panel`): the progress bar and line, the residual and the test
  metric against ``x`` (SVG, one series per run, in the run's colour), side by side or, with
  ``columns`` 1, one above the other;
* ``{"kind": "tuning_steps", "run": id, ...}`` (:func:`tuning_steps_panel`): a tuning run's
  objective (its records' ``extras["objective"]``) and test error per step, with its progress line;
* ``{"kind": "tuning_map", "run": id, "grid": map or None, "title"}`` (:func:`tuning_map_panel`):
  the path of the records' (``log10_penalty``, ``log10_sigma``) extras over a shaded map of the
  objective (:func:`krrcore.tuning.validation_map`), each σ's best λ dashed;
* ``{"kind": "fit", "run": id, "target": key, "traces": [names], "shape": [rows, cols], "mark"}``
  (:func:`fit_panel`): the run's fit figure — a plotly chart the page draws itself inside
  ``st.container(key=target)`` (:func:`krr_app.charts.fit.fit_figure`, the figure the finished run
  shows), marked as the running one by ``layout.meta[mark]`` = the run's id — restyled in place
  with every new picture (``frame``): the named traces' ``y`` (1-D) or ``z`` (2-D, ``shape`` rows
  × cols) and the title naming the picture's iteration. The finished figure carries no mark.

Every run the panels name is polled (``?since=`` its record count, and ``&frame_since=`` its
latest picture's iteration when a panel draws pictures). Each look's answer updates the run's
state in the browser — ``records`` (with their numeric ``extras``), ``frame``, ``text``,
``status``, ``active``, ``paused`` — and every panel is drawn again from it by
``PANELS[kind](box, panel, ctx)``: ``box`` is the panel's own element in the component,
``ctx.runs`` the run states by id, ``ctx.data`` what the page passed. A new kind is one function
added to ``PANELS`` (and a Python builder here), as the tuning panels are.
"""

from __future__ import annotations

import streamlit as st

from krr_app import units
from krr_app.charts import figures as charts, fit as fit_charts
from krr_app.jobs.live_api import PREFIX, run_state
from krr_app.jobs.surface import GRID_1D, GRID_2D

#: The key of a running fit figure's ``layout.meta`` that names its run (:func:`krr_app.parts.fit_views.fit_chart`
#: sets it): the fit panel restyles that figure only, never the finished one drawn in its place.
LIVE_FIGURE_MARK = "krr_live_run"

_JS = r"""
const NS = 'http://www.w3.org/2000/svg';
const HEIGHT = 330, PAD = {l: 58, r: 14, t: 30, b: 42}, GAP = 48;

function el(name, attrs, parent, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

function div(className, parent) {
  const e = document.createElement('div');
  e.className = className;
  if (parent) parent.appendChild(e);
  return e;
}

// Log-axis ticks as plotly draws them: powers of ten over many decades (10^k), and 1, 2, 5 × 10^k
// over two decades or fewer (a test error), labelled as plain numbers.
function logTicks(lo, hi) {
  const a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
  const ticks = [];
  if (b - a <= 2) {
    for (let k = a; k <= b; k++) for (const m of [1, 2, 5]) {
      const v = m * Math.pow(10, k);
      if (v >= lo / 1.0001 && v <= hi * 1.0001) ticks.push({v, text: v >= 1000 ? v.toLocaleString('en-US')
                                                                  : String(+v.toPrecision(2))});
    }
    return ticks;
  }
  const step = Math.max(1, Math.ceil((b - a) / 6));
  for (let k = a; k <= b; k += step) {
    const v = Math.pow(10, k);
    if (v >= lo / 1.0001 && v <= hi * 1.0001) ticks.push({v, power: k});
  }
  return ticks;
}

function tickLabel(g, x, y, tick) {
  const t = el('text', {x, y, 'text-anchor': 'end', 'font-size': 12, fill: '#555'}, g);
  if (tick.power === undefined) { t.textContent = tick.text; return; }
  t.textContent = '10';
  el('tspan', {dy: -6, 'font-size': 9}, t, String(tick.power));
}

function usable(r, xkey, ykey) { return r[ykey] !== null && r[ykey] > 0 && r[xkey] !== null; }

function chart(svg, x0, y0, width, title, series, xkey, ykeys, xtitle) {
  const g = el('g', {transform: `translate(0 ${y0})`}, svg);
  el('text', {x: x0 + width / 2, y: 16, 'text-anchor': 'middle', 'font-size': 14, fill: '#333'}, g, title);
  const left = x0 + PAD.l, right = x0 + width - PAD.r, top = PAD.t, bottom = HEIGHT - PAD.b;
  el('text', {x: (left + right) / 2, y: HEIGHT - 6, 'text-anchor': 'middle', 'font-size': 13, fill: '#444'}, g, xtitle);
  const pts = [];
  for (const s of series) for (const r of s.records) for (const y of ykeys)
    if (usable(r, xkey, y)) pts.push([r[xkey], r[y]]);
  if (!pts.length) {
    el('text', {x: (left + right) / 2, y: (top + bottom) / 2, 'text-anchor': 'middle', 'font-size': 13, fill: '#888'},
       g, 'drawn as the solver runs');
    return;
  }
  let xmin = Math.min(...pts.map(p => p[0])), xmax = Math.max(...pts.map(p => p[0]));
  if (xmax === xmin) { xmin -= 0.5; xmax += 0.5; }
  let ylo = Math.min(...pts.map(p => p[1])), yhi = Math.max(...pts.map(p => p[1]));
  if (yhi / ylo < 3) { ylo /= 1.5; yhi *= 1.5; }
  const ly0 = Math.log10(ylo) - 0.03 * Math.log10(yhi / ylo), ly1 = Math.log10(yhi) + 0.03 * Math.log10(yhi / ylo);
  const X = v => left + (v - xmin) / (xmax - xmin) * (right - left);
  const Y = v => bottom - (Math.log10(v) - ly0) / (ly1 - ly0) * (bottom - top);
  for (const tick of logTicks(Math.pow(10, ly0), Math.pow(10, ly1))) {
    el('line', {x1: left, y1: Y(tick.v), x2: right, y2: Y(tick.v), stroke: '#eee'}, g);
    tickLabel(g, left - 6, Y(tick.v) + 4, tick);
  }
  el('line', {x1: left, y1: bottom, x2: right, y2: bottom, stroke: '#999'}, g);
  for (const frac of [0, 0.25, 0.5, 0.75, 1]) {
    const v = xmin + frac * (xmax - xmin);
    if (xkey === 'iteration' && Math.abs(v - Math.round(v)) > 1e-9) continue;
    el('text', {x: X(v), y: bottom + 16, 'text-anchor': 'middle', 'font-size': 12, fill: '#555'}, g,
       xkey === 'iteration' ? String(Math.round(v)) : v.toFixed(2));
  }
  for (const s of series) for (const y of ykeys) {
    const p = s.records.filter(r => usable(r, xkey, y));
    if (!p.length) continue;
    const dotted = y === 'train_metric';
    el('path', {d: p.map((r, i) => (i ? 'L' : 'M') + X(r[xkey]).toFixed(1) + ',' + Y(r[y]).toFixed(1)).join(''),
                fill: 'none', stroke: s.color, 'stroke-width': 2, 'stroke-dasharray': dotted ? '2 3' : 'none'}, g);
    if (!dotted) for (const r of p)
      el('circle', {cx: X(r[xkey]).toFixed(1), cy: Y(r[y]).toFixed(1), r: 3, fill: s.color,
                    class: 'krr-live-point'}, g);
  }
}

// The residual and the test metric of the panel's runs, with the progress bar and line above.
function convergence(box, panel, ctx) {
  if (!box._parts) {
    const bar = div('krr-live-bar', box), fill = div('', bar), text = div('krr-live-text', box);
    const svg = el('svg', {width: '100%', role: 'img', 'aria-label': 'convergence, drawn as the solver runs'}, box);
    box._parts = {fill, text, svg, legend: div('krr-live-legend', box)};
  }
  const {fill, text, svg, legend} = box._parts;
  const runs = panel.runs.map(id => ctx.runs.get(id));
  const names = new Set(runs.flatMap(r => r.records.map(x => x.metric)).filter(Boolean));
  const name = names.size === 1 ? (panel.metric_names[[...names][0]] || [...names][0]) : 'metric';
  const train = runs.some(r => r.records.some(x => x.train_metric !== null));
  const metricTitle = 'Test ' + name + (train ? ' (train: dotted)' : '');
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const width = Math.max(box.clientWidth || 0, 400);
  if (panel.columns === 1) {
    svg.setAttribute('height', 2 * HEIGHT);
    chart(svg, 0, 0, width, panel.residual_title, runs, panel.x, ['residual'], panel.x_title);
    chart(svg, 0, HEIGHT, width, metricTitle, runs, panel.x, ['val_metric', 'train_metric'], panel.x_title);
  } else {
    const half = (width - GAP) / 2;
    svg.setAttribute('height', HEIGHT);
    chart(svg, 0, 0, half, panel.residual_title, runs, panel.x, ['residual'], panel.x_title);
    chart(svg, half + GAP, 0, half, metricTitle, runs, panel.x, ['val_metric', 'train_metric'], panel.x_title);
  }
  const active = runs.filter(r => r.active);
  const now = active.find(r => r.status === 'running') || active[0];
  text.textContent = runs.length === 1 ? (now ? now.text : '') :
    `${runs.length - active.length} of ${runs.length} runs finished · now: ${now ? now.text : '—'}`;
  const done = runs.reduce((sum, r) => sum + (r.active ? (r.maxiter && r.records.length ?
    Math.min(1, r.records[r.records.length - 1].iteration / r.maxiter) : 0) : 1), 0);
  fill.style.width = (100 * done / runs.length).toFixed(1) + '%';
  legend.innerHTML = '';
  if (runs.length > 1) for (const r of runs) {
    const item = document.createElement('span');
    const swatch = document.createElement('i');
    swatch.style.background = r.color;
    item.append(swatch, document.createTextNode(r.label));
    legend.appendChild(item);
  }
}

// A frame's values as a plain array, once per frame: Streamlit may redraw the figure from a JSON
// copy of its data, and JSON turns a Float32Array into an object plotly cannot draw.
function decode(frame) {
  if (!frame._decoded) {
    const bytes = Uint8Array.from(atob(frame.values), c => c.charCodeAt(0));
    frame._decoded = Array.from(new Float32Array(bytes.buffer));
  }
  return frame._decoded;
}

// The run's fit figure, drawn by the page with plotly in st.container(key=panel.target), restyled
// in place with the run's latest picture: the figure the finished run shows, moving.
function fit(box, panel, ctx) {
  const run = ctx.runs.get(panel.run), frame = run && run.frame;
  // An ended run's figure is the page's: the rerun its end asks for draws the finished one in
  // this place, and a restyle still in flight as plotly replaces the figure left it without its
  // surface and boundary. Its last picture is dropped instead (the finished figure shows it).
  if (!frame || !run.active) return;
  const plot = document.querySelector(`.st-key-${panel.target} .js-plotly-plot`);
  if (!plot || !window.Plotly || !plot.data) return;      // drawn at a later look
  // Only the figure drawn while this run computes (fit_views.fit_chart marks it): the finished one,
  // drawn in the same place by the rerun the run's end asks for, is never touched.
  if (!plot.layout || !plot.layout.meta || plot.layout.meta[panel.mark] !== panel.run) return;
  const indices = panel.traces.map(name => plot.data.findIndex(t => t.name === name));
  if (indices.some(i => i < 0)) return;
  if (plot._krrFrame === frame.iteration && plot._krrTrace === plot.data[indices[0]]) return;
  const values = decode(frame);
  const now = run.paused ? ' — paused (Step: one more iteration)' : run.active ? ' — the solver is running' : '';
  const update = {}, title = `after iteration ${frame.iteration}` + now;
  if (panel.shape.length === 1) {
    update.y = [values];
  } else {
    const [rows, cols] = panel.shape, z = [];
    for (let r = 0; r < rows; r++) z.push(values.slice(r * cols, (r + 1) * cols));
    update.z = indices.map(() => z);
    if (panel.symmetric) {       // two classes: the colours centred on the boundary f = 0
      let bound = 0;
      for (const v of values) if (Math.abs(v) > bound) bound = Math.abs(v);
      update.zmin = indices.map((_, k) => k ? null : -(bound || 1));
      update.zmax = indices.map((_, k) => k ? null : (bound || 1));
    }
  }
  window.Plotly.update(plot, update, {'title.text': title, 'title.font.size': 13}, indices);
  plot._krrFrame = frame.iteration;
  plot._krrTrace = plot.data[indices[0]];     // a redraw by Streamlit replaces it: the picture is applied again
  plot.dataset.krrIteration = String(frame.iteration);
}

// A tuning run's steps: its objective and the validation (test) error of each step's model, the
// progress line above; the objective is each record's extras.objective.
function tuning_steps(box, panel, ctx) {
  if (!box._parts) {
    const text = div('krr-live-text', box);
    const svg = el('svg', {width: '100%', role: 'img', 'aria-label': 'tuning steps, drawn as the tuner runs'}, box);
    box._parts = {text, svg};
  }
  const {text, svg} = box._parts;
  const run = ctx.runs.get(panel.run);
  const records = run.records.map(r => ({...r, objective: r.extras && r.extras.objective !== undefined ?
                                                          r.extras.objective : null}));
  const series = [{records, color: panel.color}];
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const width = Math.max(box.clientWidth || 0, 400), half = (width - GAP) / 2;
  svg.setAttribute('height', HEIGHT);
  chart(svg, 0, 0, half, panel.objective_title, series, 'iteration', ['objective'], panel.x_title);
  chart(svg, half + GAP, 0, half, panel.metric_title, series, 'iteration', ['val_metric'], panel.x_title);
  svg.setAttribute('data-steps', String(records.length));
  text.textContent = run.text || '';
}

// The path of (log10 λ, log10 σ) of a tuning run's records over a heat map of the objective
// (panel.grid: krrcore.tuning.validation_map), each σ's best λ dotted, the latest point ringed.
function tuning_map(box, panel, ctx) {
  if (!box._svg) {
    box._svg = el('svg', {width: '100%', height: HEIGHT + 40, role: 'img',
                          'aria-label': 'the path of log sigma and log lambda over the map of the objective'}, box);
  }
  const svg = box._svg, grid = panel.grid, run = ctx.runs.get(panel.run);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const width = Math.max(box.clientWidth || 0, 400), H = HEIGHT + 40;
  const left = PAD.l, right = width - PAD.r, top = PAD.t, bottom = H - PAD.b;
  el('text', {x: (left + right) / 2, y: 16, 'text-anchor': 'middle', 'font-size': 14, fill: '#333'}, svg,
     panel.title);
  el('text', {x: (left + right) / 2, y: H - 6, 'text-anchor': 'middle', 'font-size': 13, fill: '#444'}, svg, 'log₁₀ λ');
  el('text', {x: 14, y: (top + bottom) / 2, 'text-anchor': 'middle', 'font-size': 13, fill: '#444',
              transform: `rotate(-90 14 ${(top + bottom) / 2})`}, svg, 'log₁₀ σ');
  const pts = run.records.filter(r => r.extras && r.extras.log10_sigma !== undefined && r.extras.stage < 5)
                         .map(r => [r.extras.log10_penalty, r.extras.log10_sigma]);
  const xs = (grid ? grid.log10_penalty : []).concat(pts.map(p => p[0]));
  const ys = (grid ? grid.log10_sigma : []).concat(pts.map(p => p[1]));
  if (!xs.length) return;
  let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const X = v => left + (v - x0) / (x1 - x0) * (right - left), Y = v => bottom - (v - y0) / (y1 - y0) * (bottom - top);
  if (grid) {
    const cells = [];
    for (const row of grid.values) for (const v of row) if (v !== null && v > 0) cells.push(Math.log10(v));
    const lo = Math.min(...cells), hi = Math.max(...cells);
    const gx = grid.log10_penalty, gy = grid.log10_sigma;
    const half = (a, i) => (i + 1 < a.length ? a[i + 1] - a[i] : a[i] - a[i - 1]) / 2;
    grid.values.forEach((row, i) => row.forEach((v, j) => {
      const t = v !== null && v > 0 && hi > lo ? (Math.log10(v) - lo) / (hi - lo) : 1;
      const shade = Math.round(235 - 150 * (1 - t));      // darker = lower objective
      el('rect', {x: X(gx[j] - half(gx, j)).toFixed(1), y: Y(gy[i] + half(gy, i)).toFixed(1),
                  width: Math.max(1, X(gx[j] + half(gx, j)) - X(gx[j] - half(gx, j))).toFixed(1),
                  height: Math.max(1, Y(gy[i] - half(gy, i)) - Y(gy[i] + half(gy, i))).toFixed(1),
                  fill: `rgb(${shade}, ${Math.round(shade * 0.95 + 12)}, 245)`, class: 'krr-map-cell'}, svg);
    }));
    el('path', {d: grid.best_log10_penalty.map((v, i) => (i ? 'L' : 'M') + X(v).toFixed(1) + ','
                                                         + Y(gy[i]).toFixed(1)).join(''),
                fill: 'none', stroke: '#fff', 'stroke-width': 2, 'stroke-dasharray': '3 3'}, svg);
  }
  for (const frac of [0, 0.25, 0.5, 0.75, 1]) {
    el('text', {x: X(x0 + frac * (x1 - x0)), y: bottom + 16, 'text-anchor': 'middle', 'font-size': 12, fill: '#555'},
       svg, (x0 + frac * (x1 - x0)).toFixed(1));
    el('text', {x: left - 6, y: Y(y0 + frac * (y1 - y0)) + 4, 'text-anchor': 'end', 'font-size': 12, fill: '#555'},
       svg, (y0 + frac * (y1 - y0)).toFixed(2));
  }
  if (!pts.length) return;
  el('path', {d: pts.map((p, i) => (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ',' + Y(p[1]).toFixed(1)).join(''),
              fill: 'none', stroke: '#e45756', 'stroke-width': 2}, svg);
  for (const p of pts) el('circle', {cx: X(p[0]).toFixed(1), cy: Y(p[1]).toFixed(1), r: 3, fill: '#e45756',
                                     class: 'krr-path-point'}, svg);
  const last = pts[pts.length - 1];
  el('circle', {cx: X(last[0]).toFixed(1), cy: Y(last[1]).toFixed(1), r: 8, fill: 'none', stroke: '#222',
                'stroke-width': 2}, svg);
  svg.setAttribute('data-points', String(pts.length));
}

// Panel kinds: each draws one panel from the runs' states, at every look (see the module docstring).
const PANELS = {convergence, fit, tuning_steps, tuning_map};

export default function (component) {
  const {data, setTriggerValue, parentElement} = component;
  let root = parentElement.querySelector('.krr-live');
  if (!root) {
    root = div('krr-live', parentElement);
  }
  if (root._krrStop) root._krrStop();      // a rerun mounts it again: one loop per chart
  root.innerHTML = '';
  const runs = new Map(data.runs.map(r => [r.id, {...r, records: r.records.slice()}]));
  const boxes = data.panels.map(p => div(`krr-panel krr-panel-${p.kind}` + (p.width === 'half' ? ' krr-half' : ''),
                                         root));
  const framed = new Set(data.panels.filter(p => p.kind === 'fit').map(p => p.run));
  const ctx = {runs, data};
  let stopped = false, timer = null;

  function draw() {
    data.panels.forEach((p, i) => {
      try { PANELS[p.kind](boxes[i], p, ctx); } catch (e) { console.error('live panel ' + p.kind, e); }
    });
  }

  // A run ended: ask for the page rerun that draws it, and ask again until the rerun replaces this
  // chart (a trigger sent while the page's previous run was still being drawn was seen to be lost).
  // Not while this chart is stale (Streamlit's data-stale: a page run asked for or under way): that
  // run replaces it, and a second one, asked for as it draws, drew the finished fit a second time.
  let asked = 0;
  function ended(id) {
    draw();
    setTriggerValue('ended', id + ':' + asked);
    asked += 1;
    if (asked < 20) askAgain(id, 1500);
  }
  function stale(node) {      // up through the shadow root the chart may be drawn in
    for (; node; node = node.parentNode || node.host) {
      if (node.nodeType === 1 && node.getAttribute('data-stale') === 'true') return true;
    }
    return false;
  }
  function askAgain(id, ms) {
    timer = setTimeout(() => {
      if (stopped) return;
      if (stale(parentElement)) askAgain(id, 500);
      else ended(id);
    }, ms);
  }

  async function look() {
    if (stopped) return;
    let next = data.poll_ms;
    try {
      for (const r of [...runs.values()].filter(r => r.active)) {
        let url = data.api + r.id + '?since=' + r.records.length;
        if (framed.has(r.id)) url += '&frame_since=' + (r.frame ? r.frame.iteration : -1);
        const answer = await fetch(url, {cache: 'no-store'});
        if (stopped) return;
        if (!answer.ok) { r.active = false; ended(r.id); return; }     // forgotten with its session
        const state = await answer.json();
        r.records.push(...state.records);
        if (state.frame) r.frame = state.frame;
        r.text = state.text;
        r.status = state.status;
        r.active = state.active;
        r.paused = state.paused;
        next = Math.min(next, state.next_ms);
        if (!state.active) { ended(r.id); return; }
      }
      draw();
    } catch (e) {
      next = Math.max(next, 2000);      // the server restarts or the network blinks: ask again later
    }
    if (!stopped) timer = setTimeout(look, next);
  }

  draw();
  timer = setTimeout(look, data.poll_ms);
  root._krrStop = () => { stopped = true; if (timer) clearTimeout(timer); };
  return root._krrStop;
}
"""

_CSS = """
.krr-live { display: flex; flex-wrap: wrap; column-gap: 2rem; }
.krr-panel { flex: 1 1 100%; min-width: 0; }
.krr-panel.krr-half { flex-basis: calc(50% - 1rem); }
.krr-panel-fit { display: none; }
.krr-live-bar { height: 0.5rem; border-radius: 0.25rem; background: rgba(151, 166, 195, 0.25); overflow: hidden; }
.krr-live-bar > div { height: 100%; background: #1f77b4; }
.krr-live-text { font-size: 0.875rem; margin: 0.3rem 0 0.2rem; min-height: 1.3rem; }
.krr-live-legend span { margin-right: 1rem; font-size: 0.8rem; white-space: nowrap; }
.krr-live-legend i { display: inline-block; width: 1.2rem; height: 0.2rem; margin: 0 0.3rem 0.2rem 0;
                     vertical-align: middle; }
"""

_component = st.components.v2.component("krr_live_chart", js=_JS, css=_CSS)


#: The iteration axis of logistic-loss runs, whose records are Newton steps (one per step).
NEWTON_AXIS = "Newton step (logistic loss)"


def x_title(runs, x: str) -> str:
    """The convergence chart's x-axis title: "Newton step" when every run's records are Newton
    steps (the logistic loss), both names when some are, else :data:`krr_app.charts.X_AXES`'."""
    logistic = [getattr(getattr(run, "config", None), "loss", "squared") == "logistic" for run in runs]
    if x != "iteration" or not any(logistic):
        return charts.X_AXES[x]
    return NEWTON_AXIS if all(logistic) else f"{charts.X_AXES[x]}; {NEWTON_AXIS}"


def convergence_panel(runs, x: str, *, columns: int = 2) -> dict:
    """The residual and test-metric panels of ``runs`` against ``x`` ("iteration" or "seconds")."""
    data = next((run.data for run in runs if getattr(run, "data", None) is not None), None)
    names = {**charts.METRIC_NAMES, **{m: units.metric_label(data, m) for m in ("rmse", "mae")}}
    return {
        "kind": "convergence",
        "runs": [run.id for run in runs],
        "x": x,
        "x_title": x_title(runs, x),
        "residual_title": charts.RESIDUAL_TITLE,
        "metric_names": names,
        "columns": columns,
    }


def fit_panel(run, target: str) -> dict:
    """The live pictures of ``run``'s model, drawn into its fit figure inside ``st.container(key=target)``."""
    data = run.data
    shape = [GRID_1D] if data.d == 1 else [GRID_2D, GRID_2D]
    return {
        "kind": "fit",
        "run": run.id,
        "target": target,
        "traces": list(fit_charts.fit_live_traces(data)),
        "shape": shape,
        "symmetric": data.task == "binary",
        "mark": LIVE_FIGURE_MARK,
    }


def tuning_steps_panel(run, objective_title: str) -> dict:
    """A tuning run's objective and test error per step (:mod:`krr_app.charts.tuning` draws the same
    when it has finished)."""
    metric = next((r.metric for r in run.records if r.metric), "mse")
    return {
        "kind": "tuning_steps",
        "run": run.id,
        "color": charts.PALETTE[0],
        "x_title": "step",
        "objective_title": f"Objective: {objective_title}",
        "metric_title": f"Test {charts.metric_title(metric)}",
    }


def tuning_map_panel(run, grid: dict | None, title: str) -> dict:
    """The path of a tuning run's (log σ, log λ) over ``grid`` (a :func:`krrcore.tuning.validation_map`)."""
    keep = ("log10_sigma", "log10_penalty", "values", "best_log10_penalty")
    values = None if grid is None else {k: grid[k] for k in keep}
    if values is not None:  # JSON has no NaN
        values["values"] = [[v if v == v else None for v in row] for row in values["values"]]
    return {"kind": "tuning_map", "run": run.id, "grid": values, "title": title}


def live_chart(runs, panels: list[dict], *, key: str) -> None:
    """Draw ``panels`` (see the module docstring) of ``runs`` (some active) with their records and
    pictures so far, and keep them current from the browser; when a run ends the page reruns once
    (``on_ended_change``)."""
    data = {"api": PREFIX, "runs": [], "panels": panels}
    framed = {p["run"] for p in panels if p["kind"] == "fit"}
    intervals = []
    for i, run in enumerate(runs):
        state = run_state(run, frame_since=-1 if run.id in framed else None)
        intervals.append(state["next_ms"])
        data["runs"].append(
            {
                "id": run.id,
                "label": run.label,
                "color": charts.PALETTE[i % len(charts.PALETTE)],
                "maxiter": run.config.maxiter,
                "status": state["status"],
                "active": state["active"],
                "paused": state["paused"],
                "text": state["text"],
                "records": state["records"],
                "frame": state.get("frame"),
            }
        )
    data["poll_ms"] = min(intervals) if intervals else 1000
    _component(data=data, key=key, on_ended_change=lambda: None)
