// reverie-canary dashboard: live updates by server-sent events, and arrow keys between matrix cells.
// Plain JavaScript shipped in the package: no build step, nothing loaded from elsewhere.
(function () {
  "use strict";

  function refreshModels() {
    var fleet = document.getElementById("fleet");
    if (!fleet) { return; }
    var cycles = fleet.getAttribute("data-cycles") || "";
    fleet.querySelectorAll("section.model").forEach(function (section) {
      var model = section.getAttribute("data-model");
      var url = "/fragment/model?model=" + encodeURIComponent(model) + "&cycles=" + encodeURIComponent(cycles);
      fetch(url, { cache: "no-store" }).then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      }).then(function (html) {
        var focused = document.activeElement;
        var keep = focused && focused.classList && focused.classList.contains("cell")
          ? [focused.closest("tr").getAttribute("data-provider"), focused.getAttribute("data-cycle-no")] : null;
        var holder = document.createElement("div");
        holder.innerHTML = html;
        var fresh = holder.querySelector("section.model");
        if (!fresh) { return; }
        fresh.classList.add("fresh");
        section.replaceWith(fresh);
        if (keep) {
          var again = fresh.querySelector('tr[data-provider="' + CSS.escape(keep[0]) + '"] .cell[data-cycle-no="' + keep[1] + '"]');
          if (again) { again.focus(); }
        }
      }).catch(function () { /* the next event tries again */ });
    });
  }

  function connect() {
    var live = document.getElementById("live");
    if (!window.EventSource || !document.getElementById("fleet")) { return; }
    if (new URLSearchParams(window.location.search).get("live") === "0") { live.textContent = "not live (?live=0)"; return; }
    var source = new EventSource("/events");
    source.addEventListener("hello", function () { live.setAttribute("data-state", "on"); live.textContent = "live"; });
    source.addEventListener("cycle", refreshModels);
    source.onerror = function () { live.setAttribute("data-state", "off"); live.textContent = "reconnecting"; };
  }

  function move(cell, dx, dy) {
    var row = cell.parentElement;
    var cells = Array.prototype.slice.call(row.querySelectorAll(".cell"));
    var i = cells.indexOf(cell);
    if (dx) {
      var next = cells[i + dx];
      if (next) { next.focus(); }
      return;
    }
    var rows = Array.prototype.slice.call(row.parentElement.children);
    var target = rows[rows.indexOf(row) + dy];
    if (target) {
      var there = target.querySelectorAll(".cell")[i];
      if (there) { there.focus(); }
    }
  }

  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (!t.classList || !t.classList.contains("cell")) { return; }
    var d = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[e.key];
    if (d) { e.preventDefault(); move(t, d[0], d[1]); }
  });

  document.addEventListener("DOMContentLoaded", connect);
}());
