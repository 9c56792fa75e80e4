// seqline dashboard: times in the reader's own zone and how long ago. The pages carry each
// time as <time datetime="…UTC"> (units.py's `when`), readable in UTC without this script.
"use strict";
(function () {
  const DAY = 86400000;
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  const WEEKDAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
  const ZONE = (Intl.DateTimeFormat().resolvedOptions().timeZone || "local time").replace(/_/g, " ");

  function two(n) { return (n < 10 ? "0" : "") + n; }
  function clock(d) { return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds()); }
  function dayOf(d) { return new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime(); }

  // 24-hour clock, the day in words when it is near: "today 18:24:49", "yesterday 09:12:03",
  // "Mon 14:03:00" (this week), "24 Nov 14:03:00", "24 Nov 2025 14:03:00".
  function local(d, now) {
    const days = Math.round((dayOf(now) - dayOf(d)) / DAY);
    if (days === 0) { return "today " + clock(d); }
    if (days === 1) { return "yesterday " + clock(d); }
    if (days > 1 && days < 7) { return WEEKDAYS[d.getDay()] + " " + clock(d); }
    const year = d.getFullYear() === now.getFullYear() ? "" : " " + d.getFullYear();
    return d.getDate() + " " + MONTHS[d.getMonth()] + year + " " + clock(d);
  }
  // "just now", "42 s ago", "5 min ago", "3 h ago", "2 days ago"; "in 5 min" ahead.
  function relative(d, now) {
    const s = (now - d) / 1000, a = Math.abs(s);
    const words = a < 5 ? null : a < 60 ? Math.round(a) + " s" : a < 3600 ? Math.round(a / 60) + " min"
      : a < DAY / 1000 ? Math.round(a / 3600) + " h" : Math.round(a / 86400) + " days";
    if (words === null) { return "just now"; }
    return s >= 0 ? words + " ago" : "in " + words;
  }

  function show(root) {
    const now = new Date();
    (root || document).querySelectorAll("time.when[datetime]").forEach(function (el) {
      const d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) { return; }
      const utc = el.dataset.utc || (el.dataset.utc = el.textContent);
      const at = local(d, now), ago = relative(d, now), kind = el.dataset.show;
      el.textContent = kind === "relative" ? ago : kind === "both" ? at + ", " + ago : at;
      el.title = (kind === "relative" ? at : ago) + " (" + ZONE + "); " + utc;
    });
  }

  window.seqlineTimes = { show: show, local: local, relative: relative };
  document.addEventListener("DOMContentLoaded", function () { show(); });
  // Fragments swapped in by htmx (the runs list's filters and pages) and the live parts
  // (dashboard.js tells it), and "5 min ago" kept true while the page stays open.
  document.addEventListener("htmx:afterSwap", function (e) { show(e.target); });
  document.addEventListener("seqline:updated", function () { show(); });
  setInterval(show, 30000);
})();
