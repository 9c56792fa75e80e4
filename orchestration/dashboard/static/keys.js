// seqline dashboard: keyboard navigation, and the page's selections kept in its address.
// j / k: next / previous row of the page's list (runs, a run's stages), Enter opens it;
// [ / ]: previous / next stage on a stage page; u: up (the run, or the runs).
"use strict";
(function () {
  const params = new URLSearchParams(location.search);

  // A selection lives in the address (replaceState: no history entry per slider step),
  // so a link, a reload or Back shows the same view.
  function keep(name, value) {
    const now = new URLSearchParams(location.search);
    if (value === null) { now.delete(name); } else { now.set(name, value); }
    const query = now.toString();
    history.replaceState(history.state, "", location.pathname + (query ? "?" + query : "") + location.hash);
  }

  // Restored before the charts draw (deferred scripts run before DOMContentLoaded).
  const slider = document.getElementById("smoothing");
  if (slider) {
    const shown = document.getElementById("smoothing-shown");
    const wanted = Number(params.get("smoothing"));
    if (wanted > 0 && wanted < 1) { slider.value = String(wanted); }
    shown.textContent = slider.value;
    slider.addEventListener("input", function () {
      shown.textContent = slider.value;
      keep("smoothing", Number(slider.value) > 0 ? slider.value : null);
    });
  }
  const hide = document.getElementById("hide-finished");
  if (hide) {
    hide.checked = params.get("hide") === "finished";
    document.body.classList.toggle("hide-finished", hide.checked);
    hide.addEventListener("change", function () {
      document.body.classList.toggle("hide-finished", hide.checked);
      keep("hide", hide.checked ? "finished" : null);
    });
  }

  // The rows j and k move through: the runs on the runs page, the stages on a run page.
  function rows() {
    return Array.from(document.querySelectorAll("table.runs tbody tr, table.stages tr.stage-row"))
      .filter(function (r) { return r.offsetParent !== null && r.querySelector("a"); });
  }
  function move(by) {
    const all = rows();
    if (!all.length) { return; }
    const at = all.findIndex(function (r) { return r.classList.contains("selected"); });
    const next = all[Math.max(0, Math.min(all.length - 1, at < 0 ? 0 : at + by))];
    all.forEach(function (r) { r.classList.remove("selected"); });
    next.classList.add("selected");
    next.querySelector("a").focus();  // Enter follows the focused link
    next.scrollIntoView({ block: "nearest" });
  }
  function follow(id) {
    const link = document.getElementById(id);
    if (link) { location.href = link.href; }
  }

  document.addEventListener("keydown", function (event) {
    const target = event.target;
    if (event.ctrlKey || event.metaKey || event.altKey ||
        (target && /^(INPUT|SELECT|TEXTAREA)$/.test(target.tagName))) { return; }
    const actions = { j: function () { move(1); }, k: function () { move(-1); },
      "[": function () { follow("stage-prev"); }, "]": function () { follow("stage-next"); },
      u: function () { follow("up"); } };
    if (actions[event.key]) { event.preventDefault(); actions[event.key](); }
  });
})();
