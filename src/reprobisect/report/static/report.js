(function () {
  function key(row, i) {
    var c = row.children[i];
    var v = c ? (c.dataset.sort !== undefined ? c.dataset.sort : c.textContent.trim()) : "";
    return /^-?\d+(\.\d+)?$/.test(v) ? parseFloat(v) : (v === "–" ? null : v);
  }
  function cmp(x, y) {
    if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
    if (typeof x === "number" && typeof y === "number") { return x - y; }
    return String(x).localeCompare(String(y), undefined, {numeric: true});
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, i) {
      th.title = "sort";
      th.addEventListener("click", function () {
        var dir = th.dataset.dir === "asc" ? "desc" : "asc";
        Array.prototype.forEach.call(heads, function (h) { delete h.dataset.dir; });
        th.dataset.dir = dir;
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) { var c = cmp(key(a, i), key(b, i)); return dir === "asc" ? c : -c; });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
    table.dataset.sortable = "ready";
  });
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.tagName === "DETAILS") { el.open = true; el.scrollIntoView(); }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  document.documentElement.dataset.ready = "1";
})();
