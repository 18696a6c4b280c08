// Queue page: a "my job" form (bounds and the probability of starting within a
// deadline), the observed waits against the bounds predicted at submission, and the
// queue's clusters.
import {
  api, el, every, fmtCount, fmtDuration, fmtPercent, fmtPercentAtLeast, fmtTime, fmtWalltime, initChrome, iso,
  parseDuration, queuePath, showError, statusText, unix,
} from "/ui/api.js";
import { clusterColor, waitsChart } from "/ui/charts.js";

const REFRESH_S = 30;
const QUANTILES = [0.5, 0.75, 0.95];
/** Points asked of the waits endpoint: it thins a longer window to this many. */
const POINTS = 2000;

initChrome("queue");
const params = new URLSearchParams(location.search);
const site = params.get("site") || "";
const queue = params.get("queue") || "";
const base = queuePath(site, queue);
const errorNode = document.getElementById("error");
const summary = document.getElementById("summary");

document.getElementById("title").textContent = `${site} / ${queue}`;
document.title = `${queue} at ${site} · qbets`;

let asOf = null;
let chart = null;
/** The queue as last listed (state and limits), or null before the first answer. */
let current = null;
/** Counts waits requests: only the latest one's answer is drawn. */
let waitsAsked = 0;
/** The queue's clusters as last listed ([] before the first answer or when it failed). */
let clusters = [];

async function loadSummary() {
  const listing = await api(`/v1/sites/${encodeURIComponent(site)}/queues`);
  const q = (listing.queues || []).find((x) => x.name === queue);
  if (!q) throw new Error(`site ${site} has no queue ${queue}`);
  asOf = listing.as_of;
  current = q;
  const state = q.state;
  const since = q.since;
  summary.replaceChildren(
    state ? el("span", { class: `badge ${state === "up" || state === "ok" ? "ok" : "bad"}` }, statusText(state)) : "",
    state && since ? ` since ${fmtTime(since)} · ` : state ? " · " : "",
    `${fmtCount(q.history_size)} waits in history · `,
    q.last_release ? `last start ${fmtTime(q.last_release)} · ` : "",
    q.max_nodes ? `at most ${q.max_nodes} nodes · ` : "",
    q.max_walltime_s ? `at most ${fmtDuration(q.max_walltime_s)} · ` : "",
    `as of ${fmtTime(listing.as_of)}`,
  );
  return q;
}

async function loadWaits() {
  const span = Number(document.getElementById("window").value);
  const until = asOf ? unix(asOf) + 1 : Math.floor(Date.now() / 1000);
  const asked = ++waitsAsked;
  const answer = await api(`${base}/waits`, {
    query: { since: iso(until - span), until: iso(until), limit: POINTS, thin: true },
  });
  // A window chosen while this answer was on its way has been asked for since.
  if (asked !== waitsAsked) return;
  const jobs = answer.jobs || [];
  chart = waitsChart(document.getElementById("waits-chart"), jobs, chart, clusterLines());
  const judged = jobs.filter((j) => j.bound_s !== null && j.bound_s !== undefined);
  const held = judged.filter((j) => j.wait_s <= j.bound_s).length;
  const meta = document.getElementById("waits-meta");
  meta.dataset.points = String(jobs.length);
  meta.textContent = [
    `${fmtCount(jobs.length)} jobs${answer.total !== undefined && answer.total > jobs.length ? ` of ${fmtCount(answer.total)} (evenly thinned)` : answer.truncated ? " (thinned)" : ""}`,
    judged.length ? `bound held for ${fmtPercent(held / judged.length, 1)} of ${fmtCount(judged.length)} with a prediction` : null,
  ].filter(Boolean).join(" · ");
}

function rangeText(r) {
  if (!r) return "—";
  const nodeHours = (v) => {
    const h = v / 3600;
    return h < 10 && h !== Math.round(h) ? h.toLocaleString(undefined, { maximumFractionDigits: 2 }) : fmtCount(Math.round(h));
  };
  const unit = r.attribute === "walltime_s" ? fmtDuration : r.attribute === "node_seconds" ? nodeHours : (v) => fmtCount(v);
  const name = r.attribute === "walltime_s" ? "walltime" : r.attribute === "nodes" ? "nodes" : "node-hours";
  // A job asks for at least one node: the engine's lowest interval starts at 0.
  const lo = r.attribute === "nodes" ? Math.max(1, r.lo) : r.lo;
  return `${name} ${unit(lo)} – ${r.hi === null || r.hi === undefined ? "∞" : unit(r.hi)}`;
}

/** The value of a job's clustering attribute, as the engine computes it. */
function attributeOf(job, attribute) {
  if (attribute === "nodes") return job.nodes;
  if (attribute === "walltime_s") return job.walltime_s;
  if (attribute === "node_seconds") return job.nodes * job.walltime_s;
  return null;
}

/**
 * Of the clusters `indices` (in the API's order), the one whose range (`part` of it)
 * takes the job: the last whose low end is at or below its value, the first when none
 * is — the engine's rule (values beyond the ends go to the end intervals).
 */
function assign(indices, part, job) {
  let chosen = indices[0];
  for (const i of indices) {
    const r = clusters[i].range[part];
    const v = attributeOf(job, r.attribute);
    if (v !== null && v !== undefined && r.lo <= v) chosen = i;
  }
  return chosen;
}

/** The chart's bound lines, one per cluster, or null for one line. */
function clusterLines() {
  if (clusters.length < 2) return null;
  const all = clusters.map((_c, i) => i);
  return {
    labels: clusters.map((c) => [rangeText(c.range.primary), c.range.secondary ? rangeText(c.range.secondary) : null]
      .filter(Boolean).join(", ")),
    of(job) {
      const p = assign(all, "primary", job);
      if (!clusters[p].range.secondary) return p;
      const lo = clusters[p].range.primary.lo;
      return assign(all.filter((i) => clusters[i].range.primary.lo === lo), "secondary", job);
    },
  };
}

async function loadClusters() {
  const node = document.getElementById("clusters");
  let answer;
  try {
    answer = await api(`${base}/clusters`);
  } catch (error) {
    clusters = [];
    node.replaceChildren(el("p", { class: "muted" }, error.message));
    return;
  }
  clusters = answer.clusters || [];
  if (!clusters.length) {
    node.replaceChildren(el("p", { class: "muted" }, "No clusters yet: too little history."));
    return;
  }
  node.replaceChildren(el("table", {},
    el("thead", {}, el("tr", {},
      el("th", { scope: "col" }, "Jobs with"),
      el("th", { scope: "col" }, "and"),
      el("th", { scope: "col", class: "num" }, "Waits in window"),
      el("th", { scope: "col", class: "num" }, "0.95 bound"))),
    el("tbody", {}, clusters.map((c, i) => {
      const range = c.range;
      const bound = c.bound_95_s;
      // The service gives no bound while the queue may be down; say so, not "—".
      const none = current && current.state === "maybe_down" ? statusText("maybe_down") : statusText("insufficient_history");
      return el("tr", {},
        el("td", {}, clusters.length > 1
          ? el("span", { class: "swatch", style: `background:${clusterColor(i)}`, title: "its bound line in the chart" })
          : "", rangeText(range.primary)),
        el("td", {}, range.secondary ? rangeText(range.secondary) : el("span", { class: "muted" }, "any (not split further)")),
        el("td", { class: "num" }, fmtCount(c.history_size)),
        el("td", { class: "num" }, bound === null || bound === undefined ? none : fmtDuration(bound)));
    }))));
}

// --- My job -----------------------------------------------------------------------

const form = document.getElementById("myjob");
const out = document.getElementById("myjob-out");
const formError = document.getElementById("myjob-error");

function markInvalid(problem) {
  for (const input of form.querySelectorAll("input")) input.removeAttribute("aria-invalid");
  for (const f of (problem && problem.errors) || []) {
    const input = form.querySelector(`[name="${CSS.escape(f.field)}"]`);
    if (input) input.setAttribute("aria-invalid", "true");
  }
}

function localCheck() {
  const errors = [];
  const nodes = Number(form.nodes.value);
  if (!Number.isInteger(nodes) || nodes < 1) errors.push({ field: "nodes", detail: "must be a whole number of at least 1" });
  const walltime = parseDuration(form.walltime.value);
  if (!(walltime >= 1)) errors.push({ field: "walltime", detail: "must be a duration such as 01:30:00 or 5400" });
  const deadline = parseDuration(form.deadline.value);
  if (!(deadline >= 1)) errors.push({ field: "deadline", detail: "must be a duration such as 00:30:00 or 1800" });
  return { nodes, walltime, deadline, errors };
}

async function ask(event) {
  event.preventDefault();
  const { nodes, walltime, deadline, errors } = localCheck();
  if (errors.length) {
    const problem = { title: "Check the form", detail: "", errors };
    markInvalid(problem);
    showError(formError, Object.assign(new Error(""), { problem }));
    out.replaceChildren();
    return;
  }
  const confidence = form.confidence.value;
  const button = document.getElementById("ask");
  button.disabled = true;
  out.setAttribute("aria-busy", "true");
  try {
    const shape = { nodes, walltime: fmtWalltime(walltime), confidence };
    const [bounds, chance] = await Promise.all([
      Promise.all(QUANTILES.map((quantile) => api(`${base}/bound`, { query: { ...shape, quantile } }))),
      api(`${base}/deadline`, { query: { ...shape, deadline: fmtWalltime(deadline) } }),
    ]);
    markInvalid(null);
    showError(formError, null);
    const items = bounds.map((b, i) => el("div", { class: "answer", dataset: { quantile: QUANTILES[i], boundS: b.bound_s ?? "", status: b.status } },
      el("dt", {}, `${QUANTILES[i] * 100} % of such jobs start within`),
      el("dd", { title: b.limit ? b.limit.detail : "" }, b.status === "ok" ? fmtDuration(b.bound_s) : statusText(b.status),
        el("span", { class: "sub" }, b.status === "ok" ? `${fmtCount(b.bound_s)} s` : ""))));
    const p = chance.probability;
    items.push(el("div", { class: "answer", dataset: { probability: p ?? "", status: chance.status } },
      el("dt", {}, `Chance to start within ${fmtDuration(deadline)}`),
      el("dd", {}, p === null || p === undefined ? statusText(chance.status) : `≥ ${fmtPercentAtLeast(p)}`,
        el("span", { class: "sub" }, `at ${Number(confidence) * 100} % confidence`))));
    const first = bounds[0] || {};
    out.replaceChildren(...[
      el("dl", { class: "answers", id: "answers" }, items),
      beyondLimits(nodes, walltime),
      el("p", { class: "muted small" },
        first.status === "ok" ? `${fmtCount(first.history_size)} waits of similar jobs · ` : "",
        `as of ${fmtTime(first.as_of)}`),
    ].filter(Boolean));
  } catch (error) {
    markInvalid(error.problem);
    showError(formError, error);
    out.replaceChildren();
  } finally {
    button.disabled = false;
    out.setAttribute("aria-busy", "false");
  }
}

/** A warning when the queue's limits (as last listed) would refuse such a job. */
function beyondLimits(nodes, walltime) {
  const over = [];
  if (current && current.max_nodes && nodes > current.max_nodes) over.push(`at most ${fmtCount(current.max_nodes)} nodes`);
  if (current && current.total_nodes && nodes > current.total_nodes && !(current.max_nodes && current.max_nodes < current.total_nodes)) over.push(`at most ${fmtCount(current.total_nodes)} nodes (all it reaches)`);
  if (current && current.max_walltime_s && walltime > current.max_walltime_s) over.push(`at most ${fmtDuration(current.max_walltime_s)} of walltime`);
  if (!over.length) return null;
  return el("p", { class: "alert", id: "myjob-limits" },
    `This queue takes ${over.join(" and ")}: the scheduler would refuse such a job, whatever it would wait.`);
}

form.addEventListener("submit", ask);

// --- My job, by its id ------------------------------------------------------------

const jobForm = document.getElementById("jobid-form");
const jobOut = document.getElementById("jobid-out");
const jobError = document.getElementById("jobid-error");

/** One answer box (the same look as the shape's answers). */
function answerBox(term, value, sub, data = {}) {
  return el("div", { class: "answer", dataset: data }, el("dt", {}, term),
    el("dd", {}, value, sub ? el("span", { class: "sub" }, sub) : ""));
}

/** Why a job has no bound, in words (the API's status). */
function noBound(status) {
  return status ? statusText(status) : "none given";
}

async function lookUp(event) {
  if (event) event.preventDefault();
  const id = jobForm.job_id.value.trim();
  const input = document.getElementById("jobid");
  if (!id) {
    input.setAttribute("aria-invalid", "true");
    showError(jobError, Object.assign(new Error("Type the scheduler's id of your job."), { problem: { title: "Check the form" } }));
    jobOut.replaceChildren();
    return;
  }
  input.removeAttribute("aria-invalid");
  const deadline = parseDuration(form.deadline.value);
  const query = { confidence: form.confidence.value };
  if (deadline >= 1) query.deadline = fmtWalltime(deadline);
  const button = document.getElementById("lookup");
  button.disabled = true;
  jobOut.setAttribute("aria-busy", "true");
  try {
    const job = await api(`/v1/sites/${encodeURIComponent(site)}/jobs/${encodeURIComponent(id)}`, { query });
    showError(jobError, null);
    // Keep the id in the address, so the page can be bookmarked or sent.
    const next = new URLSearchParams(location.search);
    next.set("job", id);
    history.replaceState(null, "", `?${next}`);
    jobOut.replaceChildren(...jobAnswer(job, deadline));
  } catch (error) {
    input.setAttribute("aria-invalid", "true");
    showError(jobError, error);
    jobOut.replaceChildren();
  } finally {
    button.disabled = false;
    jobOut.setAttribute("aria-busy", "false");
  }
}

/** What the service says of one job: its state, its bound at submission and, while it
 * waits, the bound on the rest of its wait and its chance of starting in time. */
function jobAnswer(job, deadline) {
  const items = [];
  const shape = [job.nodes ? `${fmtCount(job.nodes)} nodes` : "", job.walltime_s ? fmtDuration(job.walltime_s) : ""]
    .filter(Boolean).join(" × ");
  items.push(answerBox(`Job ${job.job_id}`, job.state, shape || "shape not reported", { state: job.state }));
  if (job.queue !== queue) {
    items.push(answerBox("Queue", job.queue, "not this page's queue"));
  }
  const given = job.bound_at_submission_s;
  items.push(answerBox("Bound at submission (0.95)",
    given === null || given === undefined ? noBound(job.bound_at_submission_status) : fmtDuration(given),
    job.within_bound === true ? "it started within it"
      : job.within_bound === false ? "it started later than that" : `submitted ${fmtTime(job.submit)}`,
    { boundAtSubmissionS: given ?? "", within: job.within_bound ?? "" }));
  if (job.wait_s !== null && job.wait_s !== undefined) {
    items.push(answerBox("It waited", fmtDuration(job.wait_s), `started ${fmtTime(job.start)}`, { waitS: job.wait_s }));
  }
  const p = job.pending;
  if (p) {
    items.push(answerBox("Waited so far", fmtDuration(p.waited_s),
      p.own_ahead ? `${fmtCount(p.own_ahead)} of its user's jobs ahead` : "", { waitedS: p.waited_s }));
    items.push(answerBox(`${p.quantile * 100} % chance it starts within`,
      p.bound_s === null || p.bound_s === undefined ? noBound(p.status) : `${fmtDuration(p.bound_s)} more`,
      p.status === "ok" ? `from ${fmtCount(p.history_size)} jobs that had waited as long` : "",
      { remainingS: p.bound_s ?? "", status: p.status }));
    if (deadline >= 1) {
      items.push(answerBox(`Chance to start within ${fmtDuration(deadline)}`,
        p.probability === null || p.probability === undefined ? noBound(p.status) : `≥ ${fmtPercentAtLeast(p.probability)}`,
        `at ${p.confidence * 100} % confidence`, { probability: p.probability ?? "" }));
    }
  }
  return [
    el("dl", { class: "answers", id: "job-answers" }, items),
    el("p", { class: "muted small" }, `as of ${fmtTime(job.as_of)}`),
  ];
}

jobForm.addEventListener("submit", lookUp);
if (params.get("job")) {
  jobForm.job_id.value = params.get("job");
  lookUp(null);
}

// --- Refresh ------------------------------------------------------------------------

async function refresh() {
  try {
    await loadSummary();
    // The chart draws a bound line per cluster: the clusters first.
    await loadClusters();
    await loadWaits();
    showError(errorNode, null);
  } catch (error) {
    if (!current) summary.textContent = "This queue could not be loaded.";
    showError(errorNode, error);
  }
}

document.getElementById("window-form").addEventListener("submit", (e) => e.preventDefault());
if (!site || !queue) {
  // Opened without ?site=…&queue=…: nothing to ask the service.
  document.getElementById("title").textContent = "Queue";
  summary.textContent = "No queue chosen.";
  showError(errorNode, new Error("This page shows one queue: open it from the list of all queues."));
} else {
  document.getElementById("window").addEventListener("change", () => loadWaits()
    .then(() => showError(errorNode, null))
    .catch((e) => showError(errorNode, e)));
  const ticker = every(REFRESH_S, refresh, document.getElementById("pause"));
  document.addEventListener("qbets:token", () => ticker.refresh());
}
