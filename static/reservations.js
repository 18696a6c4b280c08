// Reservation page: plan a VARQ reservation and draw its probability trajectory
// (the dissertation's Figure 5.4); with a token, make it and follow its state; list
// one's own reservations and the calibration table.
import {
  api, el, every, fmtCount, fmtDuration, fmtPercent, fmtTime, fmtWalltime, getToken,
  initChrome, iso, parseDuration, showError, unix,
} from "/ui/api.js";
import { trajectoryChart } from "/ui/charts.js";

initChrome("reservations");

const planForm = document.getElementById("plan");
const siteSelect = document.getElementById("site");
const queueSelect = document.getElementById("queue");
const planError = document.getElementById("plan-error");
const planOut = document.getElementById("plan-out");
const chartNode = document.getElementById("trajectory");
const createForm = document.getElementById("create");
const createButton = document.getElementById("create-button");
const createError = document.getElementById("create-error");
const followed = document.getElementById("followed");

let sites = [];
let chart = null;
// The plan the "Make it" button makes, and the Idempotency-Key it is made with: a
// retry of the same click (a lost answer) gets the same reservation, not a second one.
let lastRequest = null;
let lastKey = null;
// Which reservation the card follows, and its pending refresh.
let following = { id: null, timer: null };

/** A fresh Idempotency-Key (random, also where crypto.randomUUID is not offered). */
function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The plan shown no longer matches the form (or was made): it cannot be made. */
function forgetPlan() {
  lastRequest = null;
  lastKey = null;
  createButton.disabled = true;
}

/** A datetime-local value (browser time zone) for Unix seconds. */
function localInput(seconds) {
  const d = new Date(seconds * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function secondsOf(value) {
  return typeof value === "number" ? value : unix(value);
}

async function loadSites() {
  const answer = await api("/v1/sites");
  sites = answer.sites || [];
  siteSelect.replaceChildren(...sites.map((s) => el("option", { value: s.name }, `${s.name} (${s.kind})`)));
  const wanted = new URLSearchParams(location.search).get("site");
  const live = sites.find((s) => s.name === wanted) || sites.find((s) => s.kind === "live") || sites[0];
  if (live) siteSelect.value = live.name;
  await loadQueues();
}

async function loadQueues() {
  const site = sites.find((s) => s.name === siteSelect.value);
  if (!site) return;
  const answer = await api(`/v1/sites/${encodeURIComponent(site.name)}/queues`);
  queueSelect.replaceChildren(...(answer.queues || []).map((q) => el("option", { value: q.name }, q.name)));
  const wanted = new URLSearchParams(location.search).get("queue");
  if (wanted && (answer.queues || []).some((q) => q.name === wanted)) queueSelect.value = wanted;
  setDefaultStart(answer.as_of);
  forgetPlan();
}

/** Whether the person chose the time; until then it follows the site's present. */
let startChosen = false;

/** Two hours after the instant the site speaks for, on a quarter hour. */
function setDefaultStart(asOf) {
  const at = Math.ceil((unix(asOf) + 2 * 3600) / 900) * 900;
  document.getElementById("start_at").value = localInput(at);
  startChosen = false;
}

/** The default time again from the site's present just before planning: a live site's
 * clock moves on (the demo's runs 300 times as fast, two simulated hours in 24 s), so a
 * default set when the page loaded may have passed. */
async function refreshDefaultStart() {
  if (startChosen || !siteSelect.value) return;
  const answer = await api(`/v1/sites/${encodeURIComponent(siteSelect.value)}/queues`);
  setDefaultStart(answer.as_of);
}

function request() {
  const errors = [];
  const nodes = Number(planForm.nodes.value);
  if (!Number.isInteger(nodes) || nodes < 1) errors.push({ field: "nodes", detail: "must be a whole number of at least 1" });
  const walltime = parseDuration(planForm.walltime.value);
  if (!(walltime >= 1)) errors.push({ field: "walltime", detail: "must be a duration such as 01:00:00" });
  const startMs = new Date(planForm.start_at.value).getTime();
  if (!planForm.start_at.value || Number.isNaN(startMs)) errors.push({ field: "start_at", detail: "must be a date and time" });
  const p = Number(planForm.min_probability.value);
  if (!(p > 0 && p < 1)) errors.push({ field: "min_probability", detail: "must be between 0 and 1" });
  const step = Number(planForm.step.value);
  if (!Number.isInteger(step) || step < 1) errors.push({ field: "step", detail: "must be a whole number of seconds" });
  if (!siteSelect.value || !queueSelect.value) errors.push({ field: siteSelect.value ? "queue" : "site", detail: "choose one" });
  if (errors.length) return { errors, body: null };
  return {
    errors,
    body: {
      site: siteSelect.value,
      queue: queueSelect.value,
      nodes,
      walltime: fmtWalltime(walltime),
      start_at: iso(Math.floor(startMs / 1000)),
      min_probability: p,
      mode: planForm.mode.value,
      step,
    },
  };
}

function markInvalid(form, problem) {
  for (const input of form.querySelectorAll("input, select")) input.removeAttribute("aria-invalid");
  for (const f of (problem && problem.errors) || []) {
    const input = form.querySelector(`[name="${CSS.escape(f.field)}"]`);
    if (input) input.setAttribute("aria-invalid", "true");
  }
}

function drawTrajectory(trajectory, body, chosenAt) {
  chartNode.hidden = false;
  document.getElementById("trajectory-note").hidden = false;
  chart = trajectoryChart(chartNode, {
    trajectory,
    nodes: body.nodes,
    startAt: unix(body.start_at),
    minProbability: body.min_probability,
    chosenAt,
  }, chart);
  chartNode.dataset.points = String(trajectory.length);
}

/** Node-seconds as node-minutes below a node-hour, else node-hours. */
function fmtNodeTime(nodeSeconds) {
  return nodeSeconds < 3600
    ? `${fmtCount(Math.round(nodeSeconds / 60))} node-min`
    : `${fmtCount(Math.round(nodeSeconds / 3600))} node-h`;
}

async function plan(event) {
  event.preventDefault();
  try {
    await refreshDefaultStart();
  } catch {
    // Planning says what is wrong with the service if it is down.
  }
  const { errors, body } = request();
  if (errors.length) {
    const problem = { title: "Check the form", errors };
    markInvalid(planForm, problem);
    showError(planError, Object.assign(new Error(""), { problem }));
    forgetPlan();
    return;
  }
  const button = document.getElementById("plan-button");
  button.disabled = true;
  planOut.setAttribute("aria-busy", "true");
  try {
    const answer = await api("/v1/plans/varq", { method: "POST", body });
    markInvalid(planForm, null);
    showError(planError, null);
    const p = answer;
    const chosenAt = secondsOf(p.submit_at);
    const overhead = p.max_overhead_node_s;
    const required = p.required_node_s;
    planOut.replaceChildren(el("dl", { class: "answers", id: "plan-answers", dataset: { submitAt: chosenAt, probability: p.probability } },
      el("div", { class: "answer" }, el("dt", {}, "Submit at"),
        el("dd", {}, fmtTime(chosenAt), el("span", { class: "sub" }, `${fmtDuration(unix(body.start_at) - chosenAt)} ahead`))),
      el("div", { class: "answer" }, el("dt", {}, "Ask for walltime"),
        el("dd", {}, fmtDuration(p.advertised_walltime_s), el("span", { class: "sub" }, fmtWalltime(p.advertised_walltime_s)))),
      el("div", { class: "answer" }, el("dt", {}, "Probability of running in time"),
        el("dd", {}, fmtPercent(p.probability, 1), el("span", { class: "sub" }, `asked ≥ ${fmtPercent(body.min_probability)}`))),
      el("div", { class: "answer" }, el("dt", {}, "Over-allocation at worst"),
        el("dd", {}, fmtNodeTime(overhead),
          el("span", { class: "sub" }, `beside ${fmtNodeTime(required)} of work (${required ? (overhead / required).toFixed(1) : "—"}×)`)))));
    drawTrajectory(answer.trajectory || [], body, chosenAt);
    lastRequest = body;
    lastKey = newKey();
    createButton.disabled = false;
  } catch (error) {
    markInvalid(planForm, error.problem);
    showError(planError, error);
    planOut.replaceChildren();
    const best = error.problem && error.problem.best_probability;
    if (best !== undefined && best !== null) {
      // No submission time reaches the probability asked for: the best one does.
      const at = error.problem.best_submit_at;
      planOut.replaceChildren(el("p", { id: "plan-best" },
        `The best reachable is ${fmtPercent(best, 1)}`,
        at ? `, submitting at ${fmtTime(at)}` : "",
        ". Ask for a lower probability, a later time or a shorter walltime."));
    }
    chartNode.hidden = true;
    document.getElementById("trajectory-note").hidden = true;
    forgetPlan();
  } finally {
    button.disabled = false;
    planOut.setAttribute("aria-busy", "false");
  }
}

// --- Make and follow ----------------------------------------------------------------

function stateBadge(state) {
  const good = ["succeeded", "started"].includes(state);
  const bad = ["failed", "error", "refused", "cancelled"].includes(state);
  return el("span", { class: `badge ${good ? "ok" : bad ? "bad" : "info"}`, dataset: { state } }, state || "—");
}

/** Shows reservation `id` in the card and keeps it current while it can change. */
async function follow(id, retryIn = 5) {
  clearTimeout(following.timer);
  following = { id, timer: null };
  const again = (seconds) => {
    if (following.id === id) following.timer = setTimeout(() => follow(id, seconds), seconds * 1000);
  };
  if (document.hidden) return again(5);
  let r;
  try {
    r = await api(`/v1/reservations/${encodeURIComponent(id)}`);
  } catch (error) {
    if (following.id !== id) return;
    showError(createError, error);
    // Tried again, less often while it keeps failing.
    return again(Math.min(retryIn * 2, 120));
  }
  // Another reservation was chosen meanwhile: this answer is stale.
  if (following.id !== id) return;
  // Reachable again after failed refreshes: their error is over.
  if (retryIn > 5) showError(createError, null);
  const events = r.events || [];
  followed.replaceChildren(el("div", { class: "card", dataset: { reservation: id } },
    el("h3", {}, "Reservation ", el("code", {}, String(id)), " ", stateBadge(r.state),
      r.at_risk ? el("span", { class: "badge warn" }, "at risk") : null),
    el("p", { class: "small" },
      `${r.nodes} node${r.nodes === 1 ? "" : "s"} at ${r.site}/${r.queue} running at ${fmtTime(r.start_at)}`,
      r.plan ? ` · submit at ${fmtTime(r.plan.submit_at)}` : "",
      r.remote_job_id ? ` · job ${r.remote_job_id}` : ""),
    el("ol", { class: "events" }, events.map((e) => el("li", {}, fmtTime(e.at), " ", stateBadge(e.state), " ", e.reason || ""))),
    ["planned", "submitted", "started"].includes(r.state)
      ? el("button", { type: "button", class: "secondary", onclick: () => cancel(id) }, "Cancel")
      : null));
  if (!["succeeded", "failed", "cancelled", "refused", "error"].includes(r.state)) {
    // A planned reservation changes at its submission time (looked at every 30 s
    // until then); one submitted or started, within seconds.
    const untilSubmit = r.plan ? unix(r.plan.submit_at) - Date.now() / 1000 : 0;
    again(r.state === "planned" ? Math.min(30, Math.max(5, Math.ceil(untilSubmit))) : 5);
  }
}

async function cancel(id) {
  try {
    await api(`/v1/reservations/${encodeURIComponent(id)}`, { method: "DELETE" });
    await follow(id);
  } catch (error) {
    // Even a cancel that failed part-way may have changed the reservation.
    await follow(id);
    showError(createError, error);
  }
  await loadMine();
}

async function create(event) {
  event.preventDefault();
  if (!lastRequest) return;
  if (!getToken()) {
    showError(createError, Object.assign(new Error("Set a token with the reserve scope first (Token, top right)."), { problem: { title: "No token" } }));
    return;
  }
  createButton.disabled = true;
  try {
    const r = await api("/v1/reservations", {
      method: "POST",
      body: {
        ...lastRequest,
        command: createForm.command.value,
        run_mode: createForm.run_mode.value,
        on_failure: createForm.on_failure.value,
        // Optional: only sent when given (a server without a webhook secret refuses it).
        ...(createForm.webhook.value.trim() ? { webhook: createForm.webhook.value.trim() } : {}),
      },
      headers: { "Idempotency-Key": lastKey },
    });
    showError(createError, null);
    // Made: one reservation per plan; plan again for another.
    forgetPlan();
    await follow(r.id);
    await loadMine();
  } catch (error) {
    showError(createError, error);
    // A key used with other parameters (the command changed) needs a new one.
    if (error.status === 409) lastKey = newKey();
  } finally {
    createButton.disabled = !lastRequest;
  }
}

// --- Lists --------------------------------------------------------------------------

async function loadMine() {
  const node = document.getElementById("mine");
  if (!getToken()) {
    node.replaceChildren(el("p", { class: "muted" }, "Set a token to see your reservations."));
    return;
  }
  let answer;
  try {
    answer = await api("/v1/reservations");
  } catch (error) {
    node.replaceChildren(el("p", { class: "muted" }, error.status === 404 ? "This service does not manage reservations." : error.message));
    return;
  }
  const list = answer.reservations || [];
  if (!list.length) {
    node.replaceChildren(el("p", { class: "muted" }, "None yet."));
    return;
  }
  node.replaceChildren(el("table", {},
    el("thead", {}, el("tr", {}, ["Id", "Where", "Nodes", "Running at", "State", "Probability"].map((h) =>
      el("th", { scope: "col" }, h)))),
    el("tbody", {}, list.map((r) => el("tr", {},
      el("td", {}, el("a", { href: "#followed", dataset: { reservation: r.id }, onclick: () => follow(r.id) }, r.id)),
      el("td", {}, `${r.site}/${r.queue}`),
      el("td", { class: "num" }, r.nodes),
      el("td", {}, fmtTime(r.start_at)),
      el("td", {}, stateBadge(r.state)),
      el("td", { class: "num" }, fmtPercent(r.plan && r.plan.probability, 1)))))));
}

async function loadCalibration() {
  const node = document.getElementById("calibration");
  let answer;
  try {
    answer = await api("/v1/calibration");
  } catch (error) {
    node.replaceChildren(el("p", { class: "muted" }, error.status === 404 ? "This service does not report calibration." : error.message));
    return;
  }
  const rows = answer.queues;
  if (!rows.length) {
    node.replaceChildren(el("p", { class: "muted" }, "No reservation has finished yet."));
    return;
  }
  node.replaceChildren(el("table", {},
    el("thead", {}, el("tr", {},
      el("th", { scope: "col" }, "Site / queue"),
      el("th", { scope: "col", class: "num" }, "Finished"),
      el("th", { scope: "col", class: "num" }, "Predicted (mean)"),
      el("th", { scope: "col", class: "num" }, "Achieved"))),
    el("tbody", {}, rows.map((r) => el("tr", {},
      el("th", { scope: "row" }, `${r.site}/${r.queue}`),
      el("td", { class: "num" }, fmtCount(r.finished)),
      el("td", { class: "num" }, fmtPercent(r.mean_predicted_probability, 1)),
      el("td", { class: "num" }, fmtPercent(r.achieved_fraction, 1)))))));
}

planForm.addEventListener("submit", plan);
// A plan is made as it was planned: changing the form asks for a new plan first.
planForm.addEventListener("input", forgetPlan);
planForm.addEventListener("change", forgetPlan);
document.getElementById("start_at").addEventListener("input", () => { startChosen = true; });
createForm.addEventListener("submit", create);
siteSelect.addEventListener("change", () => loadQueues().catch((e) => showError(planError, e)));

/** The sites and queues, or why they cannot be read (a token needed, the service down). */
async function start() {
  try {
    await loadSites();
    showError(planError, null);
  } catch (e) {
    showError(planError, e);
  }
}

// A new token may open what the old one could not read.
document.addEventListener("qbets:token", () => {
  if (!sites.length) start();
  loadMine();
});

start();
every(60, async () => {
  await Promise.all([loadMine(), loadCalibration()]);
});
