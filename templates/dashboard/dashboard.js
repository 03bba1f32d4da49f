// sluice dashboard: live countdowns and a timed refresh of the page's live fragment.
// The pages work without it; it changes nothing but what is shown.
(function () {
  "use strict";
  var REFRESH_MS = 2000;

  function left(ms) {
    if (ms <= 0) { return "now"; }
    var s = Math.ceil(ms / 1000);
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    s = s % 60;
    return "in " + (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("time.countdown").forEach(function (t) {
      var at = Date.parse(t.getAttribute("datetime"));
      if (!isNaN(at)) { t.textContent = left(at - now); t.title = t.getAttribute("datetime"); }
    });
  }

  function refresh() {
    var live = document.getElementById("live");
    if (!live || !live.dataset.refresh) { return; }
    fetch(live.dataset.refresh, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null) { live.innerHTML = html; tick(); }
      })
      .catch(function () { /* keep what is shown; try again at the next refresh */ });
  }

  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
    setInterval(refresh, REFRESH_MS);
  });
})();
