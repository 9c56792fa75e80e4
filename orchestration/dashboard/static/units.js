// seqline dashboard: numbers in human units for the charts, and the theme's colours.
// The pages' own numbers come from units.py; these follow the same rules on chart axes.
"use strict";
window.seqlineUnits = (function () {
  // Decimals that keep neighbouring ticks apart: a step of 0.05 needs 2, of 5 none
  // (uPlot's own labels rounded a 0.004 s step to "0", "0", "0").
  function decimals(step) {
    if (!(step > 0)) { return 0; }
    return Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  }
  function fixed(v, d) {
    return v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
  }
  function significant(v) { return v === 0 ? "0" : fixed(v, decimals(Math.abs(v) / 100)); }

  // A duration in one unit: 0.004 -> "4 ms", 75 -> "1 min 15 s", 5400 -> "1 h 30 min".
  function duration(v) {
    if (v === null || v === undefined || isNaN(v)) { return ""; }
    const a = Math.abs(v);
    if (a === 0) { return "0 s"; }
    if (a < 1e-3) { return significant(v * 1e6) + " µs"; }
    if (a < 1) { return significant(v * 1e3) + " ms"; }
    if (a < 60) { return significant(v) + " s"; }
    if (a < 3600) { return Math.floor(a / 60) + " min " + Math.round(a % 60) + " s"; }
    return Math.floor(a / 3600) + " h " + Math.round((a % 3600) / 60) + " min";
  }
  // Counts and rates: 1,500; 25k; 1.2M (a unit chosen for the largest, decimals for the step).
  function count(v) {
    if (v === null || v === undefined || isNaN(v)) { return ""; }
    const a = Math.abs(v);
    if (a >= 1e6) { return significant(v / 1e6) + "M"; }
    if (a >= 1e4) { return significant(v / 1e3) + "k"; }
    return significant(v);
  }
  function bytes(v) {
    const units = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
    return (i ? significant(v) : String(v)) + " " + units[i];
  }

  // Tick labels: one unit for the whole axis (the largest tick's), decimals for the step.
  function durationTicks(splits) {
    const top = Math.max.apply(null, splits.map(Math.abs).concat([0]));
    const step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) : top;
    const unit = top >= 7200 ? [3600, " h"] : top >= 600 ? [60, " min"] : top >= 1 || top === 0
      ? [1, " s"] : top >= 1e-3 ? [1e-3, " ms"] : [1e-6, " µs"];
    return splits.map(function (v) { return fixed(v / unit[0], decimals(step / unit[0])) + unit[1]; });
  }
  function countTicks(splits) {
    const top = Math.max.apply(null, splits.map(Math.abs).concat([0]));
    const step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) : top;
    const unit = top >= 1e6 ? [1e6, "M"] : top >= 1e4 ? [1e3, "k"] : [1, ""];
    return splits.map(function (v) { return fixed(v / unit[0], decimals(step / unit[0])) + unit[1]; });
  }
  // A log axis' ticks at powers of ten (uPlot passes null for those it leaves unlabelled).
  function powerTicks(splits) {
    return splits.map(function (v) {
      if (v === null || v < 0) { return null; }  // (asinh splits reach below the floor)
      return v >= 1e6 ? fixed(v / 1e6, 0) + "M" : v >= 1e3 ? fixed(v / 1e3, 0) + "k" : fixed(v, v < 1 && v > 0 ? 1 : 0);
    });
  }
  function wholeTicks(splits) { return splits.map(function (v) { return String(Math.round(v)); }); }

  // Colours live in dashboard.css (light and dark); uPlot takes them in JS, so read them.
  function color(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }
  function palette() {
    const found = [];
    for (let i = 1; i <= 8; i += 1) { found.push(color("--chart-" + i) || "#4e79a7"); }
    return found;
  }

  return { duration: duration, count: count, bytes: bytes, durationTicks: durationTicks,
    countTicks: countTicks, powerTicks: powerTicks, wholeTicks: wholeTicks, color: color, palette: palette };
})();
