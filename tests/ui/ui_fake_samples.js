/* TEST-ONLY FAKE of trackmux/report/assets/samples.js (the samples issue ships the real
 * one): mounts a payload {step, columns, rows} as a plain table. */
window.trackmuxSamples = {
  mount: function (element, payload) {
    var t = document.createElement("table");
    t.className = "fake-samples";
    t.dataset.step = String(payload.step);
    payload.rows.forEach(function (row) {
      var tr = document.createElement("tr");
      row.forEach(function (v) { var td = document.createElement("td"); td.textContent = String(v); tr.appendChild(td); });
      t.appendChild(tr);
    });
    element.appendChild(t);
  }
};
