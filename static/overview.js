// Overview: every site and queue, its state, history and current bounds for a few
// typical job shapes, and the ingest health of each site. Refreshes itself.
import {
  api, el, every, fmtCount, fmtDuration, fmtTime, fmtWalltime, initChrome, showError,
  statusText,
} from "/ui/api.js";

const REFRESH_S = 30;
const QUANTILES = [0.5, 0.75, 0.95];
/** Typical job shapes, clipped to each queue's limits. */
const SHAPES = [
  { nodes: 1, walltime_s: 3600 },
  { nodes: 16, walltime_s: 4 * 3600 },
  { nodes: 64, walltime_s: 12 * 3600 },
];
/** Queries per `POST /v1/bounds` (the API takes up to 1000). */
const BATCH = 1000;

initChrome("overview");
const sitesNode = document.getElementById("sites");
const updated = document.getElementById("updated");
const errorNode = document.getElementById("error");

/** Every query's bound through `POST /v1/bounds`, in order: `{ ok }` or `{ error }`. */
async function bounds(queries) {
  const results = [];
  for (let i = 0; i < queries.length; i += BATCH) {
    const answer = await api("/v1/bounds", { method: "POST", body: { queries: queries.slice(i, i + BATCH) } });
    for (const r of answer.results || []) {
      results.push(r.bound ? { ok: r.bound } : { error: { message: (r.error && r.error.detail) || "no answer" } });
    }
  }
  return results;
}

/** The column shapes, each clipped to the queue's limits (the cell says when). */
function shapesFor(queue) {
  return SHAPES.map((s) => ({
    nodes: queue.max_nodes ? Math.min(s.nodes, queue.max_nodes) : s.nodes,
    walltime_s: queue.max_walltime_s ? Math.min(s.walltime_s, queue.max_walltime_s) : s.walltime_s,
  }));
}

function shapeLabel(s) {
  return `${s.nodes} node${s.nodes === 1 ? "" : "s"} · ${fmtDuration(s.walltime_s)}`;
}

/** The queue's state: from the listing when it says, else from a bound's status. */
function stateBadge(queue, answers) {
  let state = queue.state;
  const since = queue.since;
  if (!state) {
    const down = answers.find((a) => a && a.status === "maybe_down");
    if (down) state = "maybe_down";
    else if (answers.some((a) => a && a.status)) state = "up";
  }
  if (!state) return el("span", { class: "muted" }, "not known yet");
  const up = state === "up" || state === "ok";
  return el("span", {},
    el("span", { class: `badge ${up ? "ok" : "bad"}`, dataset: { state } }, statusText(state)),
    since ? el("span", { class: "muted small" }, ` since ${fmtTime(since)}`) : null);
}

/** A bound in a table cell: "47 min", "1 h 07", "2 d 4 h". */
function fmtShort(s) {
  if (s < 3600) return fmtDuration(s);
  if (s < 86400) return `${Math.floor(s / 3600)} h ${String(Math.round((s % 3600) / 60)).padStart(2, "0")}`.replace(/ h 60$/, " h 59");
  return fmtDuration(s);
}

function boundCell(result) {
  if (!result || result.error) {
    const e = result && result.error;
    return el("td", { class: "num muted", title: e ? e.message : "" }, "n/a");
  }
  const a = result.ok;
  if (a.status === "ok" && a.bound_s !== null && a.bound_s !== undefined) {
    return el("td", { class: "num bound", dataset: { boundS: a.bound_s } }, fmtShort(a.bound_s));
  }
  return el("td", { class: "num muted", title: a.limit ? a.limit.detail : statusText(a.status), dataset: { status: a.status } },
    a.status === "maybe_down" ? "down?" : a.status === "exceeds_limits" ? "over limit"
      : statusText(a.status));
}

function ingestHealth(site, ingest) {
  if (!ingest) return null;
  const sources = ingest.sources || [];
  if (!sources.length) return el("p", { class: "muted small" }, "Ingest: no sources report to this site.");
  return el("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": `Ingest health of ${site}` },
    el("table", { class: "ingest" },
      el("caption", {}, "Ingest health"),
      el("thead", {}, el("tr", {},
        ["Source", "Status", "Last success", "Last error", "Accepted", "Rejected", "Lag"].map((h, i) =>
          el("th", { scope: "col", class: i >= 4 ? "num" : null }, h)))),
      el("tbody", {}, sources.map((s) => {
        const failing = s.status ? s.status !== "ok"
          : Boolean(s.last_error && (!s.last_success || new Date(s.last_error_at || 0) > new Date(s.last_success)));
        return el("tr", { dataset: { source: s.source } },
          el("th", { scope: "row" }, s.source, s.kind && s.kind !== s.source ? el("span", { class: "muted small" }, ` (${s.kind})`) : null),
          el("td", {}, el("span", { class: `badge ${failing ? "bad" : "ok"}` }, failing ? "failing" : "ok"),
            failing && s.consecutive_failures ? el("span", { class: "muted small" }, ` ${s.consecutive_failures}× in a row`) : null),
          el("td", {}, fmtTime(s.last_success)),
          el("td", { class: "small" }, s.last_error ? `${s.last_error_at ? fmtTime(s.last_error_at) + ": " : ""}${s.last_error}` : el("span", { class: "muted" }, "none")),
          el("td", { class: "num" }, fmtCount(s.accepted)),
          el("td", { class: "num" }, fmtCount(s.rejected)),
          el("td", { class: "num" }, s.lag_s === null || s.lag_s === undefined ? el("span", { class: "muted" }, "no record yet") : fmtDuration(s.lag_s)));
      }))));
}

async function siteCard(site) {
  const [queuesResult, ingestResult] = await Promise.allSettled([
    api(`/v1/sites/${encodeURIComponent(site.name)}/queues`),
    api(`/v1/sites/${encodeURIComponent(site.name)}/ingest`),
  ]);
  if (queuesResult.status === "rejected") throw queuesResult.reason;
  const queues = queuesResult.value.queues || [];
  const ingest = ingestResult.status === "fulfilled" ? ingestResult.value : null;

  // Every bound of every shape and quantile, in one call.
  const plan = queues.map((q) => ({ queue: q, shapes: shapesFor(q) }));
  const queries = [];
  for (const p of plan) {
    p.first = queries.length;
    for (const s of p.shapes) {
      for (const quantile of QUANTILES) {
        queries.push({
          site: site.name, queue: p.queue.name, nodes: s.nodes,
          walltime: fmtWalltime(s.walltime_s), quantile, confidence: 0.95,
        });
      }
    }
  }
  const results = await bounds(queries);
  const headShapes = SHAPES;

  const table = el("table", {},
    el("caption", { class: "visually-hidden" }, `Queues of ${site.name}`),
    el("thead", {},
      el("tr", {},
        el("th", { scope: "col", rowspan: 2 }, "Queue"),
        el("th", { scope: "col", rowspan: 2 }, "State"),
        el("th", { scope: "col", rowspan: 2, class: "num" }, "History"),
        headShapes.map((s) => el("th", { scope: "colgroup", colspan: QUANTILES.length, class: "group" },
          shapeLabel(s)))),
      el("tr", {}, headShapes.map(() => QUANTILES.map((q, i) =>
        el("th", { scope: "col", class: `num${i === 0 ? " first" : ""}` }, `${q * 100} %`))))),
    el("tbody", {}, plan.map((p) => {
      const answers = results.slice(p.first, p.first + p.shapes.length * QUANTILES.length);
      const cells = [];
      for (let si = 0; si < headShapes.length; si++) {
        for (let qi = 0; qi < QUANTILES.length; qi++) {
          const shape = p.shapes[si];
          const td = boundCell(answers[si * QUANTILES.length + qi]);
          if (qi === 0) td.classList.add("first");
          const clipped = shape.nodes !== headShapes[si].nodes || shape.walltime_s !== headShapes[si].walltime_s;
          // A shape over the queue's limits is asked at them, and the cell says so.
          if (clipped && qi === 0) td.append(el("div", { class: "muted small" }, `at ${shapeLabel(shape)}`));
          td.title = td.title || `${shapeLabel(shape)}${clipped ? " (this queue's limits)" : ""}, quantile ${QUANTILES[qi]}`;
          Object.assign(td.dataset, { nodes: shape.nodes, walltimeS: shape.walltime_s, quantile: QUANTILES[qi] });
          cells.push(td);
        }
      }
      const href = `/ui/queue.html?site=${encodeURIComponent(site.name)}&queue=${encodeURIComponent(p.queue.name)}`;
      return el("tr", { dataset: { queue: p.queue.name } },
        el("th", { scope: "row" }, el("a", { href }, p.queue.name),
          p.queue.max_nodes || p.queue.max_walltime ? el("div", { class: "muted small" },
            [p.queue.max_nodes ? `≤ ${p.queue.max_nodes} nodes` : null,
             p.queue.max_walltime_s ? `≤ ${fmtDuration(p.queue.max_walltime_s)}` : null].filter(Boolean).join(", ")) : null),
        el("td", {}, stateBadge(p.queue, answers.map((a) => a && a.ok))),
        el("td", { class: "num" }, fmtCount(p.queue.history_size),
          p.queue.last_release ? el("div", { class: "muted small" }, `last start ${fmtTime(p.queue.last_release)}`) : null),
        cells);
    })));

  return el("section", { class: "card", "aria-labelledby": `site-${site.name}`, dataset: { site: site.name } },
    el("header", {},
      el("h2", { id: `site-${site.name}` }, site.name),
      el("span", { class: `badge ${site.kind === "live" ? "ok" : "info"}` }, site.kind),
      el("span", { class: "muted small" }, site.description || ""),
      el("span", { class: "muted small" }, `${site.kind === "archive" ? "as of its last record" : "as of"} ${fmtTime(site.as_of)}`)),
    queues.length
      ? el("div", { class: "table-wrap", tabindex: 0, role: "region", "aria-label": `Queues of ${site.name}` }, table)
      : el("p", { class: "muted" }, "No queues yet."),
    ingestHealth(site.name, ingest));
}

async function refresh() {
  try {
    const { sites } = await api("/v1/sites");
    const cards = await Promise.all(sites.map((s) => siteCard(s).catch((error) => {
      const box = el("div", { class: "alert", role: "alert" });
      showError(box, error);
      return el("section", { class: "card" }, el("h2", {}, s.name), box);
    })));
    // A refresh must not throw a keyboard user's focus back to the top of the page.
    const focused = document.activeElement && sitesNode.contains(document.activeElement)
      ? document.activeElement.getAttribute("href") : null;
    sitesNode.replaceChildren(...(cards.length ? cards : [el("p", { class: "card" },
      "No sites yet. Import a trace (", el("code", {}, "qbets import --site NAME FILE"),
      ") or start the demo (", el("code", {}, "qbets serve --demo"), ").")]));
    if (focused) {
      const again = [...sitesNode.querySelectorAll("a[href]")].find((a) => a.getAttribute("href") === focused);
      if (again) again.focus();
    }
    sitesNode.setAttribute("aria-busy", "false");
    showError(errorNode, null);
    updated.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every ${REFRESH_S} s`;
  } catch (error) {
    showError(errorNode, error);
    updated.textContent = `Update failed at ${new Date().toLocaleTimeString()}; retrying in ${REFRESH_S} s`;
  }
}

const ticker = every(REFRESH_S, refresh, document.getElementById("pause"));
document.addEventListener("qbets:token", () => ticker.refresh());
