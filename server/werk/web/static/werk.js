// Werk dashboard: confirmations, "select all", and the live throughput graph.
// Loaded with the page's CSP nonce; no inline handlers, no third-party code.
(function () {
  "use strict";
  var root = document.body.getAttribute("data-root") || "";

  // Ask before destructive actions (buttons carrying data-confirm).
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-confirm]");
    if (button && !window.confirm(button.getAttribute("data-confirm"))) {
      event.preventDefault();
    }
  });

  // "Select all" check boxes in job tables.
  document.addEventListener("change", function (event) {
    if (!event.target.classList.contains("check-all")) return;
    var form = event.target.closest("form");
    form.querySelectorAll('input[name="jid"]').forEach(function (box) {
      box.checked = event.target.checked;
    });
  });

  // Live graph: poll the totals every 5 s and plot the differences.
  var live = document.getElementById("live");
  if (!live) return;
  var W = 760, LEFT = 48, BASE = 118, TOP = 12, POINTS = 60, EVERY = 5000;
  var previous = null, processed = [], failed = [];

  function line(values, max) {
    var step = (W - LEFT) / (POINTS - 1);
    var offset = POINTS - values.length;
    return values.map(function (v, i) {
      var x = LEFT + (offset + i) * step;
      var y = BASE - (BASE - TOP) * (v / max);
      return x.toFixed(1) + "," + y.toFixed(1);
    }).join(" ");
  }

  function draw() {
    var max = Math.max(1, Math.max.apply(null, processed.concat(failed)));
    document.getElementById("live-processed").setAttribute("points", line(processed, max));
    document.getElementById("live-failed").setAttribute("points", line(failed, max));
    document.getElementById("live-max").textContent = String(max);
  }

  function poll() {
    fetch(root + "/_stats", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (now) {
        if (!now) return;
        if (previous) {
          processed.push(Math.max(0, now.processed - previous.processed));
          failed.push(Math.max(0, now.failed - previous.failed));
          if (processed.length > POINTS) { processed.shift(); failed.shift(); }
          draw();
        }
        previous = now;
        var p = document.getElementById("total-processed");
        var f = document.getElementById("total-failed");
        if (p) p.textContent = now.processed.toLocaleString("en-US");
        if (f) f.textContent = now.failed.toLocaleString("en-US");
      })
      .catch(function () { /* the next poll tries again */ });
  }

  poll();
  window.setInterval(poll, EVERY);
})();
