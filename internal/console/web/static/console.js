// Strata console: progressive enhancement only. Every page works without
// this script; it adds the live topic filter, the live tail and
// confirmations. Rows it inserts are HTML rendered (and escaped) by the
// server's templates.
"use strict";

function csrfToken() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.content : "";
}

// Topic list: filter rows as the user types.
function setupFilter() {
  document.querySelectorAll("input[data-filter]").forEach((input) => {
    const table = document.getElementById(input.dataset.filter);
    if (!table) return;
    const count = document.getElementById("topic-count");
    input.addEventListener("input", () => {
      const q = input.value.trim().toLowerCase();
      let shown = 0;
      table.querySelectorAll("tbody tr[data-name]").forEach((tr) => {
        const hit = tr.dataset.name.toLowerCase().includes(q);
        tr.hidden = !hit;
        if (hit) shown++;
      });
      if (count) count.textContent = shown + " topic(s) on this page match; Search looks through all topics.";
    });
  });
}

// Forms with data-confirm ask first.
function setupConfirm() {
  document.querySelectorAll("form[data-confirm]").forEach((form) => {
    form.addEventListener("submit", (e) => {
      if (!window.confirm(form.dataset.confirm)) e.preventDefault();
    });
  });
}

// Messages page: live tail. Polls the tail endpoint (which waits up to a
// second for new records) and appends the rows it renders.
const maxTailRows = 500;

function setupTail() {
  const btn = document.getElementById("tail-toggle");
  if (!btn) return;
  const rows = document.getElementById("record-rows");
  const status = document.getElementById("tail-status");
  let running = false;
  let cursor = "";
  btn.hidden = false;
  async function loop() {
    while (running) {
      let url = btn.dataset.tail;
      if (cursor) url += "&cursor=" + encodeURIComponent(cursor);
      try {
        const resp = await fetch(url, { headers: { "X-CSRF-Token": csrfToken() }, credentials: "same-origin" });
        const body = await resp.json();
        if (!running) return;
        if (!resp.ok) {
          status.textContent = "Tail stopped: " + (body.error || resp.status);
          stop();
          return;
        }
        cursor = body.cursor;
        if (body.count > 0) {
          rows.insertAdjacentHTML("beforeend", body.html);
          while (rows.rows.length > maxTailRows) rows.deleteRow(0);
        }
        // "Live" only once the first answer set the position: records
        // produced from now on will show.
        status.textContent = "Live: " + rows.querySelectorAll("tr:not(.none)").length + " record(s) since the tail started.";
      } catch (err) {
        status.textContent = "Tail stopped: " + err;
        stop();
        return;
      }
    }
  }
  function start() {
    running = true;
    cursor = "";
    rows.replaceChildren();
    btn.setAttribute("aria-pressed", "true");
    btn.textContent = "Stop live tail";
    status.textContent = "Starting the tail…";
    loop();
  }
  function stop() {
    running = false;
    btn.setAttribute("aria-pressed", "false");
    btn.textContent = "Live tail";
  }
  btn.addEventListener("click", () => (running ? stop() : start()));
}

document.addEventListener("DOMContentLoaded", () => {
  setupFilter();
  setupConfirm();
  setupTail();
});
