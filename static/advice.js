// "Which shape waits less": candidate shapes of one job (a list, or a moldable job's
// sizes from a speedup model) ranked by POST /v1/advice — the bound on the wait plus
// the walltime, best first; shapes without a number last, with the reason.
import { api, el, fmtDuration, fmtPercentAtLeast, initChrome, showError, statusText } from "/ui/api.js";

initChrome("advice");

const form = document.getElementById("advice");
const siteSelect = document.getElementById("site");
const mode = document.getElementById("mode");
const listFields = document.getElementById("list-fields");
const moldFields = document.getElementById("moldable-fields");
const errorNode = document.getElementById("advice-error");
const out = document.getElementById("advice-out");

function value(id) {
  return document.getElementById(id).value.trim();
}

function showMode() {
  const moldable = mode.value === "moldable";
  listFields.hidden = moldable;
  moldFields.hidden = !moldable;
}

/** "4x01:00:00, 16x1200" as candidates; the server checks each value. */
function candidates(text) {
  return text.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
    const [nodes, walltime] = s.split(/x/i);
    const n = Number(nodes);
    const w = /^\d+$/.test((walltime || "").trim()) ? Number(walltime) : (walltime || "").trim();
    return { nodes: Number.isInteger(n) ? n : nodes, walltime: w };
  });
}

function request() {
  const body = {};
  if (value("site")) body.site = value("site");
  if (value("queue")) body.queue = value("queue");
  if (value("deadline")) body.deadline = value("deadline");
  if (value("quantile")) body.quantile = Number(value("quantile"));
  if (mode.value === "moldable") {
    const speedup = value("speedup") === "simple"
      ? { model: "simple" }
      : { model: "downey", a: Number(value("a")), sigma: Number(value("sigma")) };
    const runtime = value("runtime");
    body.moldable = {
      speedup,
      runtime: /^\d+$/.test(runtime) ? Number(runtime) : runtime,
      at: Number(value("at")),
      nodes: { min: Number(value("min")), max: Number(value("max")) },
    };
  } else {
    body.candidates = candidates(value("shapes"));
  }
  return body;
}

function render(answer) {
  const withDeadline = answer.rows.some((r) => r.deadline);
  const head = ["Rank", "Nodes", "Walltime", "Site", "Queue", "Wait at most", "Finished within", "Status"];
  if (withDeadline) head.push("In time");
  const rows = answer.rows.map((r) => el("tr", { class: r.rank ? "ranked" : "unranked" },
    el("td", {}, r.rank ?? el("span", { class: "muted" }, "unranked")),
    el("td", {}, r.nodes),
    el("td", {}, r.walltime),
    el("td", {}, r.site),
    el("td", {}, r.queue),
    el("td", {}, r.bound_s === null || r.bound_s === undefined ? el("span", { class: "muted" }, "no number") : fmtDuration(r.bound_s)),
    el("td", {}, r.finish_s === null || r.finish_s === undefined ? el("span", { class: "muted" }, "no number") : fmtDuration(r.finish_s)),
    el("td", { title: r.reason || "" }, r.status === "ok" ? "bound given"
      : r.reason ? `${statusText(r.status)}: ${r.reason}` : statusText(r.status)),
    withDeadline ? el("td", {}, r.deadline
      ? (r.deadline.probability !== null ? fmtPercentAtLeast(r.deadline.probability) : statusText(r.deadline.status))
      : el("span", { class: "muted" }, "not asked")) : null,
  ));
  out.replaceChildren(
    el("p", { class: "muted small" },
      `${answer.ranked} of ${answer.rows.length} ranked; bounds at quantile ${answer.quantile}, confidence ${answer.confidence}.`),
    el("table", { id: "advice-table" },
      el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows)),
  );
}

async function loadSites() {
  try {
    const answer = await api("/v1/sites");
    siteSelect.replaceChildren(
      el("option", { value: "" }, "every site"),
      ...(answer.sites || []).map((s) => el("option", { value: s.name }, s.name)));
    const wanted = new URLSearchParams(location.search).get("site");
    if (wanted) siteSelect.value = wanted;
  } catch (e) {
    showError(errorNode, e);
  }
}

mode.addEventListener("change", showMode);
form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const button = document.getElementById("advise-button");
  button.disabled = true;
  out.setAttribute("aria-busy", "true");
  try {
    const answer = await api("/v1/advice", { method: "POST", body: request() });
    showError(errorNode, null);
    render(answer);
  } catch (err) {
    out.replaceChildren();
    showError(errorNode, err);
  } finally {
    button.disabled = false;
    out.removeAttribute("aria-busy");
  }
});
document.addEventListener("qbets:token", loadSites);
showMode();
loadSites();
