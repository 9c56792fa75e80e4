// seqline dashboard: charts (uPlot), live updates (server-sent events + htmx), small toggles.
// Loaded as a file: the Content-Security-Policy allows no inline script.
"use strict";
(function () {
  const U = window.seqlineUnits;
  // The stages' colours (Tableau 10 in light, brighter in dark: dashboard.css --chart-N),
  // read when a chart is drawn; a change of the system's theme redraws every chart.
  let COLORS = U.palette();
  const charts = {}, makers = {};

  // Whole numbers only (epochs, runs, blocks): uPlot's default steps would label 0.05s.
  const WHOLE = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000];

  // As wide as its box (never wider: at 400 px the page must not scroll sideways).
  function width(el) { return Math.max(200, Math.min(el.clientWidth || 900, 1100)); }

  // Every axis in the theme's colours, its ticks in human units (uPlot's default labels
  // round small waits to "0" and step epochs by 0.05).
  function axis(ticks, label, extra) {
    return Object.assign({ label: label, stroke: U.color("--fg"), size: 64,
      grid: { stroke: U.color("--line"), width: 1 }, ticks: { stroke: U.color("--line"), width: 1 },
      values: function (u, splits) { return ticks(splits); } }, extra || {});
  }
  function secondsAxis(label) { return axis(U.durationTicks, label); }
  function countAxis(label) { return axis(U.countTicks, label); }
  function wholeAxis(label) { return axis(U.wholeTicks, label, { incrs: WHOLE, size: 40 }); }
  // Whole numbers from the first to the last (one epoch or run: a unit either side).
  function wholeScale() { return { time: false, range: function (u, min, max) { return min === max ? [min - 1, max + 1] : [min, max]; } }; }
  // From 0 to a little above the top, so a peak is not drawn on the frame.
  function fromZero(least) {
    return { range: function (u, min, max) { return [0, Math.max(least, max * 1.15)]; } };
  }
  // Stages whose rates are orders of magnitude apart (a trainer's 164 records/s beside an
  // ingest's 42,000) share a log-like axis (asinh: 0 stays 0), where on a linear one the
  // slow stages read as nothing done.
  const SPREAD = 20;
  function peaksSpread(data) {
    const peaks = data.slice(1).map(function (col) {
      return Math.max.apply(null, col.filter(function (v) { return v !== null; }).concat([0]));
    }).filter(function (p) { return p > 0; });
    return peaks.length > 1 && Math.max.apply(null, peaks) >= SPREAD * Math.min.apply(null, peaks);
  }
  // Ticks and grid lines at 0 and powers of ten from 10 only (uPlot's own asinh splits add
  // every 2-9 × 10^k: bands of grey), every other power where there would be more than five.
  function powersAxis(label) {
    return axis(U.powerTicks, label, { filter: function (u, splits) { return splits; }, splits: function (u, i, min, max) {
      const powers = [];
      for (let p = 10; p <= max; p *= 10) { powers.push(p); }  // (1 would sit on 0's label)
      const every = powers.length > 5 ? 2 : 1;
      return [0].concat(powers.filter(function (_, k) { return (powers.length - 1 - k) % every === 0; }));
    } });
  }
  function powersFromZero() {
    return { distr: 4, asinh: 1, range: function (u, min, max) { return [0, Math.max(10, max * 2)]; } };
  }
  function wholeFromZero() {
    return { range: function (u, min, max) { return [0, Math.max(1, Math.ceil(max * 1.15))]; } };
  }

  // Each sample holds what happened since the one before (a peak, a rate, waits so far),
  // so a step ends at the sample; a stage's steps begin at its start (data-starts, read
  // from the page's live part), so a stage shorter than one sampling interval still shows.
  function startsOf() {
    const live = document.getElementById("live");
    try { return JSON.parse((live && live.dataset.starts) || "{}"); } catch (e) { return {}; }
  }
  // The x axis covers the run's (or stage's) whole span, not only its sampled part.
  function spanScale() {
    const live = document.getElementById("live"), span = Number(live && live.dataset.span);
    return { time: false, range: function (u, min, max) { return [0, Math.max(span || 0, max || 0, 0.1)]; } };
  }
  const RUNNING = new Set(["records_done", "waited_input", "waited_output"]);  // 0 at the start
  function fromStart(stages, starts) {
    const out = {};
    Object.keys(stages).forEach(function (name) {
      const s = stages[name], t = s.t || [], start = starts[name];
      if (!t.length || typeof start !== "number" || start >= t[0]) { out[name] = s; return; }
      const copy = {};
      Object.keys(s).forEach(function (k) { copy[k] = [RUNNING.has(k) ? 0 : s[k][0]].concat(s[k]); });
      copy.t[0] = start;
      out[name] = copy;
    });
    return out;
  }

  // Stages are sampled at slightly different instants: align them on 1 ms, relative to t0
  // (0.1 s moved a 0.3 s stage's steps by up to a sixth of it, off its table's rate).
  function align(stages, field, t0) {
    const names = Object.keys(stages);
    const xs = new Set();
    const maps = names.map(function (name) {
      const m = new Map();
      const s = stages[name];
      (s.t || []).forEach(function (t, i) {
        const x = Math.round((t - t0) * 1000) / 1000, v = s[field][i];
        xs.add(x);  // two samples within 1 ms: the larger (peaks and totals only grow)
        if (!m.has(x) || (v !== null && (m.get(x) === null || v > m.get(x)))) { m.set(x, v); }
      });
      return m;
    });
    const x = Array.from(xs).sort(function (a, b) { return a - b; });
    return { names: names, data: [x].concat(maps.map(function (m) { return x.map(function (v) { return m.has(v) ? m.get(v) : null; }); })) };
  }

  // Rows/s per interval from the records done (a running count), so that the drawn rates
  // add up to the table's records over seconds. A sample within MERGE_S of the one before
  // is merged into it: a final sample 10 ms after the last one would be a 10 ms spike.
  const MERGE_S = 0.2;
  function withRates(stages) {
    const out = {};
    Object.keys(stages).forEach(function (name) {
      const s = stages[name], t = [], done = [], sampled = [];
      (s.t || []).forEach(function (x, i) {
        const last = t.length - 1;
        if (last > 0 && x - t[last] < MERGE_S) { t.pop(); done.pop(); sampled.pop(); }
        t.push(x); done.push(s.records_done[i] || 0); sampled.push(s.rows_per_s[i]);
      });
      const rate = t.map(function (x, i) {
        return i === 0 ? null : Math.max(0, done[i] - done[i - 1]) / Math.max(x - t[i - 1], 1e-3);
      });
      if (rate.length) { rate[0] = rate.length > 1 ? rate[1] : sampled[0]; }
      out[name] = { t: t, rate: rate };
    });
    return out;
  }

  function steps() { return uPlot.paths.stepped({ align: -1 }); }
  function series(names, suffix, data, stepped, value) {
    return [{ label: "time", value: function (u, v) { return U.duration(v); } }].concat(names.map(function (n, i) {
      const shown = data ? data[i + 1].filter(function (v) { return v !== null; }).length : 99;
      const s = { label: n + (suffix || ""), stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
        points: { show: shown <= 2, size: 7 }, value: function (u, v) { return v === null ? "" : (value || U.count)(v); } };
      if (stepped) { s.paths = steps(); }
      return s;
    }));
  }

  // `make` draws the chart from scratch: kept, to redraw it in the other theme's colours.
  function plot(el, make) { makers[el.id] = make; make(); }

  function draw(el, opts, data) {
    const old = charts[el.id];
    const distr = function (scales) { return ((scales || {}).y || {}).distr || 1; };
    // (a live run's rates can spread apart: its axis turns log-like then, see peaksSpread)
    if (old && old.series.length === opts.series.length && distr(old.scales) === distr(opts.scales)) {
      old.setData(data); return;
    }
    if (old) { old.destroy(); }
    el.textContent = "";
    opts.width = width(el); opts.height = el.clientWidth < 500 ? 180 : 220; opts.title = el.dataset.title;
    opts.scales = Object.assign({ x: { time: false } }, opts.scales || {});
    charts[el.id] = el.uplot = new uPlot(opts, data, el);  // el.uplot: tests read its data
    el.dataset.drawn = "true";
  }

  // The stage page's waits end where its table's do: the row's totals at the stage's end.
  function withTotals(stages) {
    const live = document.getElementById("live");
    let ends = {};
    try { ends = JSON.parse((live && live.dataset.ends) || "{}"); } catch (e) { ends = {}; }
    Object.keys(ends).forEach(function (name) {
      const s = stages[name], end = ends[name];
      if (!s || !s.t || !s.t.length || typeof end.t !== "number") { return; }
      const last = s.t.length - 1;
      if (end.t > s.t[last]) {
        Object.keys(s).forEach(function (k) { s[k] = s[k].concat([s[k][last]]); });
        s.t[last + 1] = end.t;
      }
      ["waited_input", "waited_output"].forEach(function (k) {
        if (typeof end[k] === "number") { s[k][s[k].length - 1] = Math.max(end[k], s[k][s[k].length - 1] || 0); }
      });
    });
    return stages;
  }

  function samplesChart(el, body) {
    let all = body.stages || { [body.stage]: body.samples };
    const only = el.dataset.stage;  // a stage page's charts: its own stage of the run's samples
    if (only) { all = all[only] ? { [only]: all[only] } : {}; }
    const stages = fromStart(all, startsOf());
    const first = Object.values(stages).map(function (s) { return (s.t || [])[0]; }).filter(function (t) { return t !== undefined; });
    const kind = el.dataset.kind, ownStart = kind.indexOf("stage-") === 0 || !body.t0;  // a stage page: from its own start
    const t0 = ownStart ? Math.min.apply(null, first.length ? first : [0]) : body.t0;
    const x = secondsAxis(kind.indexOf("stage-") === 0 ? "time since the stage started" : "time since the run started");
    if (kind === "rate" || kind === "stage-rate") {
      const a = align(withRates(stages), "rate", t0);
      const spread = kind === "rate" && peaksSpread(a.data);
      draw(el, { series: series(a.names, "", a.data, true),
        scales: { x: spanScale(), y: spread ? powersFromZero() : fromZero(1) },
        axes: [x, spread ? powersAxis("records/s (log scale)") : countAxis("records/s")] }, a.data);
    } else if (kind === "occupancy") {
      const f = align(stages, "in_flight", t0), h = align(stages, "reorder_held", t0);
      let names = f.names.map(function (n) { return n + " in flight"; }).concat(h.names.map(function (n) { return n + " held"; }));
      let columns = f.data.slice(1).concat(h.data.slice(1));
      // A stage keeps its colour: in flight solid, held dashed.
      let looks = f.names.map(function (_, i) { return { stroke: COLORS[i % COLORS.length] }; })
        .concat(h.names.map(function (_, i) { return { stroke: COLORS[i % COLORS.length], dash: [5, 4] }; }));
      // Stages that never hold a block (training, evaluation) would only add flat lines.
      const some = columns.map(function (c) { return c.some(function (v) { return v > 0; }); });
      if (some.some(Boolean)) {
        names = names.filter(function (_, i) { return some[i]; });
        columns = columns.filter(function (_, i) { return some[i]; });
        looks = looks.filter(function (_, i) { return some[i]; });
      }
      const data = [f.data[0]].concat(columns);
      const shown = series(names, "", data, true, String);
      looks.forEach(function (look, i) { Object.assign(shown[i + 1], look); });
      draw(el, { series: shown, scales: { x: spanScale(), y: wholeFromZero() },
        axes: [x, wholeAxis("blocks (peak)")] }, data);
    } else if (kind === "stage-waits") {
      const totals = withTotals(JSON.parse(JSON.stringify(stages)));
      const i = align(totals, "waited_input", t0), o = align(totals, "waited_output", t0);
      const data = [i.data[0], i.data[1] || [], o.data[1] || []];
      // Linear between samples: a running total whose wait fell somewhere in the second
      // before each sample (a step would put a whole second's wait at its start).
      draw(el, { series: series(["waited on input", "waited on output"], "", data, false, U.duration),
        scales: { x: spanScale(), y: fromZero(0.01) },
        axes: [x, secondsAxis("time waited")] }, data);
    }
  }

  // TensorBoard's smoothing: an exponential moving average, debiased so that the first
  // epochs are not pulled towards 0. weight 0 draws the values as they are.
  function smoothed(values, weight) {
    let last = 0, n = 0;
    return values.map(function (v) {
      if (v === null || !isFinite(v)) { return v; }
      last = last * weight + (1 - weight) * v; n += 1;
      return last / (1 - Math.pow(weight, n));
    });
  }
  function smoothing() {
    const slider = document.getElementById("smoothing");
    return slider ? Math.min(0.99, Math.max(0, Number(slider.value) || 0)) : 0;
  }

  // The table's values as they are (thin), and smoothed over them when the slider asks.
  function epochsChart(el, epochs) {
    const wanted = JSON.parse(el.dataset.metrics || "null");  // a metric and its val_ twin
    const names = Array.from(new Set([].concat.apply([], epochs.map(function (e) { return Object.keys(e.metrics); }))))
      .filter(function (n) { return !wanted || wanted.indexOf(n) >= 0; });
    const raw = names.map(function (n) {
      return epochs.map(function (e) { return typeof e.metrics[n] === "number" ? e.metrics[n] : null; });
    });
    const weight = smoothing();
    const shown = series(names, "", [null].concat(raw), false, U.count);
    let data = [epochs.map(function (e) { return e.epoch; })].concat(raw);
    if (weight > 0) {
      shown.forEach(function (s, i) { if (i) { s.width = 1; s.alpha = 0.35; } });
      series(names, " smoothed", null, false, U.count).slice(1).forEach(function (s) { shown.push(s); });
      data = data.concat(raw.map(function (r) { return smoothed(r, weight); }));
    }
    draw(el, { series: [{ label: "epoch" }].concat(shown.slice(1)), scales: { x: wholeScale() },
      axes: [wholeAxis("epoch"), countAxis(names[0] || "")] }, data);
  }

  // The runs that ran the stage: a reused one's seconds (about 0, the reuse itself) would
  // read as the stage become instant; the table beside it lists every run.
  function historyChart(el, rows) {
    const ran = ["succeeded", "failed", "cancelled"];
    const shown = rows.slice().reverse().filter(function (r) { return r.seconds !== null && ran.indexOf(r.status) >= 0; });
    draw(el, { series: [{ label: "run", value: function (u, v) { return v === null || !shown[v - 1] ? "" : shown[v - 1].run_id; } },
      { label: "duration", stroke: COLORS[0], width: 1.5, points: { show: true }, value: function (u, v) { return U.duration(v); } }],
      scales: { x: wholeScale(), y: fromZero(0.01) },
      axes: [wholeAxis("runs, oldest first"), secondsAxis("duration")] },
      [shown.map(function (_, i) { return i + 1; }), shown.map(function (r) { return r.seconds; })]);
  }

  // Both runs' samples of one stage, each from its own start (as counted in their tables).
  function compareChart(el, both) {
    const stages = {}, stage = el.dataset.stage;
    both.forEach(function (b, i) {
      const s = (b.stages || {})[stage] || {}, t0 = (s.t || [0])[0];
      stages[i ? "B" : "A"] = Object.assign({}, s, { t: (s.t || []).map(function (t) { return t - t0; }) });
    });
    const a = align(withRates(stages), "rate", 0);
    draw(el, { series: series(a.names, "", a.data, true), scales: { y: fromZero(1) },
      axes: [secondsAxis("time since the stage started"), countAxis("records/s")] }, a.data);
  }

  function compareEpochs(el, sides) {
    const longest = Math.max(sides.A.length, sides.B.length);
    const xs = Array.from({ length: longest }, function (_, i) { return i; });
    const loss = function (es) { return xs.map(function (i) { return es[i] ? es[i].metrics.loss : null; }); };
    draw(el, { series: [{ label: "epoch" }].concat(series(["A loss", "B loss"], "", null, false, U.count).slice(1)),
      scales: { x: wholeScale() }, axes: [wholeAxis("epoch"), countAxis("loss")] }, [xs, loss(sides.A), loss(sides.B)]);
  }

  function getJSON(url) { return fetch(url, { cache: "no-store" }).then(function (r) { return r.json(); }); }

  function refreshCharts() {
    const live = document.body.dataset.live === "on";  // the stream brings the samples
    document.querySelectorAll(".chart").forEach(function (el) {
      const kind = el.dataset.kind;
      if (el.dataset.src && live) { return; }
      if (el.dataset.src) {
        getJSON(el.dataset.src).then(function (body) { plot(el, function () { samplesChart(el, body); }); });
      } else if (kind === "epochs") { plot(el, function () { epochsChart(el, JSON.parse(el.dataset.series)); }); }
      else if (kind === "history") { plot(el, function () { historyChart(el, JSON.parse(el.dataset.series)); }); }
      else if (kind === "compare") {
        Promise.all([el.dataset.srcA, el.dataset.srcB].map(getJSON))
          .then(function (both) { plot(el, function () { compareChart(el, both); }); });
      } else if (kind === "compare-epochs") { plot(el, function () { compareEpochs(el, JSON.parse(el.dataset.series)); }); }
    });
  }

  // Live: each `update` brings the page's live part as HTML and the samples it has not
  // seen; nothing is fetched, but when a stage ends: its samples are then counted as its
  // table counts them (series.counted_once), so the page reads them again, whole. On `end`
  // the stream is closed here, or EventSource would reconnect forever.
  function live() {
    const body = document.body;
    if (!body.dataset.events || body.dataset.live !== "on") { return; }
    let samples = {}, ended = endedStages();
    const source = new EventSource(body.dataset.events);
    function redraw() {
      const t0 = Number(body.dataset.t0) || undefined;
      document.querySelectorAll(".chart[data-src]").forEach(function (el) {
        plot(el, function () { samplesChart(el, { stages: samples, t0: t0 }); });
      });
    }
    source.addEventListener("update", function (event) {
      const news = JSON.parse(event.data);
      // Each live part (the run page's failure and the rest) replaces its namesake.
      const made = document.createElement("template");
      made.innerHTML = news.html;
      Array.from(made.content.children).forEach(function (el) { const old = el.id && document.getElementById(el.id); if (old) { old.replaceWith(el); } });
      document.dispatchEvent(new CustomEvent("seqline:updated"));
      Object.keys(news.samples).forEach(function (stage) {
        const have = samples[stage], add = news.samples[stage];
        if (!have || !have.t.length) { samples[stage] = add; return; }
        const last = have.t[have.t.length - 1];  // a sample read whole already is not added twice
        const from = add.t.findIndex(function (t) { return t > last; });
        if (from < 0) { return; }
        Object.keys(add).forEach(function (k) { have[k] = have[k].concat(add[k].slice(from)); });
      });
      const now = endedStages();
      const src = document.querySelector(".chart[data-src]");
      if (now > ended && src) {
        ended = now;
        getJSON(src.dataset.src).then(function (whole) { samples = whole.stages || samples; redraw(); });
      } else { redraw(); }
    });
    source.addEventListener("end", function () {
      source.close();
      body.dataset.live = "ended";
      refreshCharts();
    });
  }
  function endedStages() { const part = document.getElementById("live"); return Number(part && part.dataset.ended) || 0; }

  function resized() {
    Object.keys(charts).forEach(function (id) {
      const el = document.getElementById(id);
      if (el && charts[id]) { charts[id].setSize({ width: width(el), height: charts[id].height }); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    refreshCharts();
    live();
    let pending = null;
    window.addEventListener("resize", function () { clearTimeout(pending); pending = setTimeout(resized, 150); });
    const scheme = window.matchMedia("(prefers-color-scheme: dark)");
    scheme.addEventListener("change", function () {  // the new theme's colours
      COLORS = U.palette();
      Object.keys(makers).forEach(function (id) {
        if (charts[id]) { charts[id].destroy(); delete charts[id]; }
        makers[id]();
      });
    });
    const slider = document.getElementById("smoothing");
    if (slider) {
      slider.addEventListener("input", function () {
        document.querySelectorAll(".chart[data-kind=epochs]").forEach(function (chart) {
          if (charts[chart.id]) { charts[chart.id].destroy(); delete charts[chart.id]; }
          makers[chart.id]();
        });
      });
    }
  });
})();
