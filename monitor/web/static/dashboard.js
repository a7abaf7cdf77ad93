// monitor dashboard: live refresh of the checks table and live cron explain. No dependencies.
(function () {
  "use strict";

  function params(form) {
    return new URLSearchParams(new FormData(form)).toString();
  }

  async function fetchInto(target, url) {
    const response = await fetch(url, { headers: { Accept: "text/html" }, credentials: "same-origin" });
    if (response.redirected && response.url.indexOf("/login") !== -1) { window.location.href = response.url; return false; }
    if (!response.ok) { return false; }
    target.innerHTML = await response.text();
    return true;
  }

  // Checks page: poll the rows fragment with the current filters; filter without a reload.
  const rows = document.getElementById("check-rows");
  const filters = document.getElementById("check-filters");
  if (rows && filters) {
    const stamp = document.getElementById("refreshed");
    const refresh = async function () {
      const query = params(filters);
      if (await fetchInto(rows, rows.dataset.refresh + "?" + query)) {
        stamp.textContent = "updated " + new Date().toISOString().slice(0, 19).replace("T", " ") + " UTC";
        history.replaceState(null, "", "/?" + query);
      }
    };
    let timer = null;
    const soon = function () { clearTimeout(timer); timer = setTimeout(refresh, 200); };
    filters.addEventListener("input", soon);
    filters.addEventListener("change", soon);
    filters.addEventListener("submit", function (event) { event.preventDefault(); refresh(); });
    setInterval(function () { if (!document.hidden) { refresh(); } }, Number(rows.dataset.interval || 5000));
  }

  // Check page: a link to a tick outside the default window (#tick-… from a notification)
  // reloads the page with the window centred on that tick.
  const hash = window.location.hash;
  const here = new URLSearchParams(window.location.search);
  if (document.querySelector("svg.timeline") && hash.indexOf("#tick-") === 0 &&
      !document.getElementById(hash.slice(1)) && !here.has("around")) {
    here.set("around", hash.slice(6));
    window.location.replace(window.location.pathname + "?" + here.toString() + hash);
  }

  // Cron page: explain as you type (the same server-side explain, as an HTML fragment).
  const cron = document.getElementById("cron-form");
  if (cron) {
    const result = document.getElementById("cron-result");
    let timer = null;
    const explain = function () {
      const query = params(cron);
      fetchInto(result, cron.dataset.fragment + "?" + query).then(function (ok) {
        if (ok) { history.replaceState(null, "", "/cron?" + query); }
      });
    };
    cron.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(explain, 250); });
    cron.addEventListener("submit", function (event) { event.preventDefault(); explain(); });
  }
})();
