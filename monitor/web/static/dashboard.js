// monitor dashboard: live refresh, live schedule preview, copy buttons, per-service channel
// forms. No dependencies; every page works without it (forms post, links navigate).
(function () {
  "use strict";

  function params(form) {
    const data = new FormData(form);
    data.delete("csrf_token");
    return new URLSearchParams(data).toString();
  }

  async function fetchInto(target, url) {
    let response;
    try {
      response = await fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" });
    } catch (error) { return false; }
    if (response.redirected && response.url.indexOf("/login") !== -1) { window.location.href = response.url; return false; }
    if (!response.ok) { return false; }
    const html = await response.text();
    // keep the keyboard focus on the same link or control across a refresh
    const focused = document.activeElement;
    const key = focused && target.contains(focused) ? (focused.getAttribute("href") || focused.id) : null;
    // and keep each opened <details> (a row's last output line) open
    const opened = [...target.querySelectorAll("details[open] > summary[id]")].map(function (s) { return s.id; });
    target.innerHTML = html;
    opened.forEach(function (id) {
      const summary = document.getElementById(id);
      if (summary && target.contains(summary)) { summary.parentElement.open = true; }
    });
    if (key) {
      const again = target.querySelector('[href="' + CSS.escape(key) + '"]') || document.getElementById(key);
      if (again) { again.focus(); }
    }
    return true;
  }

  function setIcon(down) {
    const icon = document.getElementById("favicon");
    if (icon) { icon.setAttribute("href", down ? icon.dataset.down : icon.dataset.ok); }
  }

  // A failed live refresh: say that what is shown is stale, and since when (the time of the
  // data shown, the meta element's data-at, in the user's zone, its data-zone).
  function showLost(lost, meta) {
    if (!lost) { return; }
    let at = "";
    if (meta && meta.dataset.at) {
      const options = { hour: "2-digit", minute: "2-digit", hourCycle: "h23" };
      try { options.timeZone = meta.dataset.zone || "UTC"; at = new Date(meta.dataset.at).toLocaleTimeString("en-GB", options); }
      catch (error) { at = new Date(meta.dataset.at).toISOString().slice(11, 16); }
    }
    const text = "Connection lost — showing data from " + (at || "earlier") + ". Retrying every few seconds.";
    if (lost.textContent !== text) { lost.textContent = text; }
    lost.hidden = false;
  }

  function hideLost(lost) {
    if (lost) { lost.hidden = true; lost.textContent = ""; }
  }

  // Checks page: poll the live region with the current filters; filter without a reload.
  const live = document.getElementById("checks-live");
  const filters = document.getElementById("check-filters");
  if (live && filters) {
    const refresh = async function () {
      const query = params(filters);
      const here = new URLSearchParams(window.location.search);
      const keep = new URLSearchParams(query);
      if (here.get("page") && keep.get("page") === "1" && !filters.dataset.changed) { keep.set("page", here.get("page")); }
      const full = keep.toString();
      const lost = document.getElementById("live-lost");
      if (await fetchInto(live, live.dataset.refresh + "?" + full)) {
        const meta = document.getElementById("live-meta");
        if (meta) { document.title = meta.dataset.title; setIcon(Number(meta.dataset.down) > 0); }
        history.replaceState(null, "", "/?" + full);
        hideLost(lost);
      } else {
        showLost(lost, document.getElementById("live-meta"));
      }
    };
    let timer = null;
    const soon = function () { filters.dataset.changed = "1"; clearTimeout(timer); timer = setTimeout(refresh, 200); };
    filters.addEventListener("input", soon);
    filters.addEventListener("change", soon);
    filters.addEventListener("submit", function (event) { event.preventDefault(); soon(); });
    setInterval(function () { if (!document.hidden) { refresh(); } }, Number(live.dataset.interval || 5000));
  }

  // Check page: refresh the header (status, why, episode, last failure) every few seconds.
  const head = document.getElementById("check-head");
  if (head) {
    setInterval(async function () {
      if (document.hidden) { return; }
      const lost = document.getElementById("live-lost");
      if (await fetchInto(head, head.dataset.refresh)) {
        const meta = document.getElementById("head-meta");
        if (meta) { document.title = meta.dataset.title; setIcon(meta.dataset.status === "down"); }
        hideLost(lost);
      } else {
        showLost(lost, document.getElementById("head-meta"));
      }
    }, Number(head.dataset.interval || 5000));
    const first = document.getElementById("head-meta");
    if (first) { setIcon(first.dataset.status === "down"); }
  }

  // Timeline: a click on a tick's mark goes to its row in the ticks table.
  document.querySelectorAll("svg.timeline").forEach(function (drawing) {
    drawing.addEventListener("click", function (event) {
      const tick = event.target.closest ? event.target.closest("[data-tick]") : null;
      if (tick) { window.location.hash = "tick-" + tick.dataset.tick; }
    });
  });

  // A link to a tick outside the default window (#tick-… from a notification) reloads the
  // page with the window centred on that tick.
  const hash = window.location.hash;
  const here = new URLSearchParams(window.location.search);
  if (document.querySelector("svg.timeline") && hash.indexOf("#tick-") === 0 &&
      !document.getElementById(hash.slice(1)) && !here.has("around")) {
    here.set("around", hash.slice(6));
    window.location.replace(window.location.pathname + "?" + here.toString() + hash);
  }

  // Copy buttons: the snippet's text to the clipboard, said in a live region.
  document.querySelectorAll("button.copy").forEach(function (button) {
    button.addEventListener("click", async function () {
      const source = document.getElementById(button.dataset.copy);
      const said = document.getElementById("copied");
      const text = source ? source.textContent : "";
      try {
        await navigator.clipboard.writeText(text);
      } catch (error) {
        const range = document.createRange();
        range.selectNodeContents(source);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        document.execCommand("copy");
      }
      if (said) { said.textContent = "Copied " + button.textContent.replace(/^Copy /, "") + "."; }
    });
  });

  // Explain a schedule as you type: the cron page and the check form's preview.
  function explainer(form, target, fields, address) {
    let timer = null;
    const explain = function () {
      const query = new URLSearchParams();
      fields.forEach(function (name) { const input = form.elements[name]; if (input) { query.set(name, input.value); } });
      if (!query.has("count")) { query.set("count", "5"); }
      fetchInto(target, target.dataset.fragment + "?" + query.toString()).then(function (ok) {
        if (ok && address) { history.replaceState(null, "", address + "?" + query.toString()); }
      });
    };
    form.addEventListener("input", function (event) {
      if (fields.indexOf(event.target.name) !== -1) { clearTimeout(timer); timer = setTimeout(explain, 250); }
    });
    return explain;
  }
  const cron = document.getElementById("cron-form");
  if (cron) {
    cron.dataset.fragment = cron.dataset.fragment || "/fragments/cron";
    const result = document.getElementById("cron-result");
    result.dataset.fragment = cron.dataset.fragment;
    const explain = explainer(cron, result, ["schedule", "tz", "dialect", "count"], "/cron");
    cron.addEventListener("submit", function (event) { event.preventDefault(); explain(); });
  }
  const checkForm = document.getElementById("check-form");
  if (checkForm) {
    const preview = document.getElementById("schedule-preview");
    const explain = explainer(checkForm, preview, ["schedule", "tz", "dialect"], null);
    if (checkForm.elements.schedule && checkForm.elements.schedule.value) { explain(); }
    // show the fields of the chosen kind only
    const showKind = function () {
      const chosen = checkForm.querySelector('input[name="kind"]:checked');
      checkForm.querySelectorAll(".kind-fields").forEach(function (set) {
        set.hidden = chosen && set.dataset.kind !== chosen.value;
      });
    };
    checkForm.querySelectorAll('input[name="kind"]').forEach(function (radio) { radio.addEventListener("change", showKind); });
    showKind();
  }

  // Add a channel: show the chosen service's fields only.
  const service = document.getElementById("service");
  if (service) {
    const show = function () {
      document.querySelectorAll(".service-fields").forEach(function (set) {
        set.hidden = set.dataset.service !== service.value;
        set.disabled = set.hidden;
      });
    };
    service.addEventListener("change", show);
    show();
  }
})();
