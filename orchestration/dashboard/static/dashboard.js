// seqline dashboard: charts (uPlot), live updates (server-sent events + htmx), small toggles.
// Loaded as a file: the Content-Security-Policy allows no inline script.
"use strict";
(function () {
  const COLORS = ["#1c7ed6", "#e8590c", "#2f9e44", "#ae3ec9", "#f08c00", "#0c8599", "#c2255c", "#5c940d"];
  const charts = {};

  function width(el) { return Math.max(320, Math.min(el.clientWidth || 900, 1100)); }

  // Stages are sampled at slightly different instants: align them on 0.1 s, relative to t0.
  function align(stages, field, t0) {
    const names = Object.keys(stages);
    const xs = new Set();
    const maps = names.map(function (name) {
      const m = new Map();
      const s = stages[name];
      (s.t || []).forEach(function (t, i) { const x = Math.round((t - t0) * 10) / 10; xs.add(x); m.set(x, s[field][i]); });
      return m;
    });
    const x = Array.from(xs).sort(function (a, b) { return a - b; });
    return { names: names, data: [x].concat(maps.map(function (m) { return x.map(function (v) { return m.has(v) ? m.get(v) : null; }); })) };
  }

  function series(names, suffix) {
    return [{ label: "s" }].concat(names.map(function (n, i) {
      return { label: n + (suffix || ""), stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true };
    }));
  }

  function draw(el, opts, data) {
    const old = charts[el.id];
    if (old && old.series.length === opts.series.length) { old.setData(data); return; }
    if (old) { old.destroy(); }
    el.textContent = "";
    opts.width = width(el); opts.height = 220; opts.title = el.dataset.title;
    opts.scales = Object.assign({ x: { time: false } }, opts.scales || {});
    charts[el.id] = new uPlot(opts, data, el);
    el.dataset.drawn = "true";
  }

  function samplesChart(el, body) {
    const stages = body.stages || { [body.stage]: body.samples };
    const first = Object.values(stages).map(function (s) { return (s.t || [])[0]; }).filter(function (t) { return t !== undefined; });
    const t0 = body.t0 || Math.min.apply(null, first.length ? first : [0]);
    const kind = el.dataset.kind;
    if (kind === "rate" || kind === "stage-rate") {
      const a = align(stages, "rows_per_s", t0);
      draw(el, { series: series(a.names, " rows/s") }, a.data);
    } else if (kind === "occupancy") {
      const f = align(stages, "in_flight", t0), h = align(stages, "reorder_held", t0);
      const names = f.names.map(function (n) { return n + " in flight"; }).concat(h.names.map(function (n) { return n + " held"; }));
      draw(el, { series: series(names) }, [f.data[0]].concat(f.data.slice(1), h.data.slice(1)));
    } else if (kind === "stage-waits") {
      const i = align(stages, "waited_input", t0), o = align(stages, "waited_output", t0);
      draw(el, { series: series(["waited on input", "waited on output"]) }, [i.data[0], i.data[1] || [], o.data[1] || []]);
    }
  }

  function epochsChart(el, epochs) {
    const names = Array.from(new Set([].concat.apply([], epochs.map(function (e) { return Object.keys(e.metrics); }))));
    const data = [epochs.map(function (e) { return e.epoch; })].concat(names.map(function (n) {
      return epochs.map(function (e) { return typeof e.metrics[n] === "number" ? e.metrics[n] : null; });
    }));
    draw(el, { series: [{ label: "epoch" }].concat(series(names).slice(1)) }, data);
  }

  function historyChart(el, rows) {
    const shown = rows.slice().reverse().filter(function (r) { return r.seconds !== null; });
    draw(el, { series: [{ label: "run" }, { label: "seconds", stroke: COLORS[0], width: 1.5, points: { show: true } }] },
      [shown.map(function (_, i) { return i; }), shown.map(function (r) { return r.seconds; })]);
  }

  function compareChart(el) {
    Promise.all([el.dataset.srcA, el.dataset.srcB].map(function (u) { return fetch(u).then(function (r) { return r.json(); }); }))
      .then(function (both) {
        const stages = {};
        both.forEach(function (b, i) {
          const s = b.samples, t0 = (s.t || [0])[0];
          stages[i ? "B" : "A"] = Object.assign({}, s, { t: (s.t || []).map(function (t) { return t - t0; }) });
        });
        const a = align(stages, "rows_per_s", 0);
        draw(el, { series: series(a.names, " rows/s") }, a.data);
      });
  }

  function compareEpochs(el, sides) {
    const longest = Math.max(sides.A.length, sides.B.length);
    const xs = Array.from({ length: longest }, function (_, i) { return i; });
    const loss = function (es) { return xs.map(function (i) { return es[i] ? es[i].metrics.loss : null; }); };
    draw(el, { series: [{ label: "epoch" }].concat(series(["A loss", "B loss"]).slice(1)) }, [xs, loss(sides.A), loss(sides.B)]);
  }

  function refreshCharts() {
    const live = document.body.dataset.live === "on";  // the stream brings the samples
    document.querySelectorAll(".chart").forEach(function (el) {
      const kind = el.dataset.kind;
      if (el.dataset.src && live) { return; }
      if (el.dataset.src) {
        fetch(el.dataset.src, { cache: "no-store" }).then(function (r) { return r.json(); })
          .then(function (body) { samplesChart(el, body); });
      } else if (kind === "epochs") { epochsChart(el, JSON.parse(el.dataset.series)); }
      else if (kind === "history") { historyChart(el, JSON.parse(el.dataset.series)); }
      else if (kind === "compare") { compareChart(el); }
      else if (kind === "compare-epochs") { compareEpochs(el, JSON.parse(el.dataset.series)); }
    });
  }

  // Live: each `update` brings the page's live part as HTML and the samples it has not
  // seen; nothing is fetched. On `end` the stream is closed here, or EventSource would
  // reconnect forever.
  function live() {
    const body = document.body;
    if (!body.dataset.events || body.dataset.live !== "on") { return; }
    const samples = {};
    const source = new EventSource(body.dataset.events);
    source.addEventListener("update", function (event) {
      const news = JSON.parse(event.data);
      const part = document.getElementById("live");
      if (part) { part.outerHTML = news.html; }
      Object.keys(news.samples).forEach(function (stage) {
        const have = samples[stage], add = news.samples[stage];
        if (!have) { samples[stage] = add; return; }
        Object.keys(add).forEach(function (k) { have[k] = have[k].concat(add[k]); });
      });
      const t0 = Number(body.dataset.t0) || undefined;
      document.querySelectorAll(".chart[data-src]").forEach(function (el) {
        samplesChart(el, { stages: samples, t0: t0 });
      });
    });
    source.addEventListener("end", function () {
      source.close();
      body.dataset.live = "ended";
    });
  }

  function hideFinished() {
    const box = document.getElementById("hide-finished");
    if (!box) { return; }
    box.checked = localStorage.getItem("seqline.hideFinished") === "1";
    document.body.classList.toggle("hide-finished", box.checked);
    box.addEventListener("change", function () {
      localStorage.setItem("seqline.hideFinished", box.checked ? "1" : "0");
      document.body.classList.toggle("hide-finished", box.checked);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    refreshCharts();
    live();
    hideFinished();
  });
})();
