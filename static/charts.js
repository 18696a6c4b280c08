// Charts with the vendored uPlot (window.uPlot, loaded by a classic script tag):
// observed waits against predicted bounds, and a VARQ probability trajectory.
import { el, fmtDuration, fmtTime } from "/ui/api.js";

const COLORS = {
  wait: "#1d4ed8",
  miss: "#dc2626",
  bound: "#c2410c",
  probability: "#166534",
  target: "#6b7280",
  chosen: "#b91c1c",
  overhead: "#7c3aed",
};

/** A uPlot chart that follows its container's width. */
function responsive(container, opts, data) {
  container.replaceChildren();
  const height = () => (container.clientWidth < 560 ? 260 : 340);
  const chart = new window.uPlot(
    { ...opts, width: Math.max(280, container.clientWidth), height: height() },
    data,
    container,
  );
  const observer = new ResizeObserver(() => {
    chart.setSize({ width: Math.max(280, container.clientWidth), height: height() });
  });
  observer.observe(container);
  return {
    chart,
    destroy() {
      observer.disconnect();
      chart.destroy();
    },
  };
}

/**
 * Where a wait of zero is drawn: a log axis has no zero, so jobs that started at once
 * sit on a line of their own below 1 s, labelled "0 s", not on the 1 s gridline.
 */
const ZERO_AT = 0.4;

function durationTicks(_u, values) {
  return values.map((v) => (v === null ? "" : v === ZERO_AT ? "0 s" : fmtDuration(v)));
}

/** Ticks of a log axis of seconds at durations people read at a glance. */
const NICE_S = [1, 10, 60, 5 * 60, 15 * 60, 3600, 4 * 3600, 12 * 3600, 86400, 4 * 86400, 7 * 86400, 30 * 86400];

function durationSplits(_u, _axis, min, max) {
  const inside = NICE_S.filter((s) => s >= min * 0.999 && s <= max * 1.001);
  // Too many for a short axis: every other one.
  const shown = inside.length > 7 ? inside.filter((_s, i) => i % 2 === 0) : inside;
  return min <= ZERO_AT ? [ZERO_AT, ...shown] : shown;
}

/**
 * A log range from the nice value below the data to the one above; never empty (all
 * values equal to one nice value, say every wait 1 s, would make a range of one point
 * and a log axis that places nothing).
 */
function durationRange(_u, min, max) {
  const lo = min < 1 ? ZERO_AT * 0.75 : [...NICE_S].reverse().find((s) => s <= min) ?? 1;
  let hi = NICE_S.find((s) => s >= max) ?? max * 2;
  if (hi <= lo) hi = NICE_S.find((s) => s > lo) ?? lo * 10;
  return [lo, hi];
}

function empty(container, text) {
  container.replaceChildren(el("p", { class: "empty" }, text));
  return { destroy() {} };
}

/** Colours of the clusters' bound lines, in the order the API lists the clusters. */
const CLUSTER_COLORS = ["#c2410c", "#7c3aed", "#0f766e", "#a16207", "#be185d", "#4d7c0f", "#78350f", "#57534e", "#a21caf", "#3f6212"];

/** The colour of the `i`-th cluster's bound line (the queue page's table shows it too). */
export function clusterColor(i) {
  return CLUSTER_COLORS[i % CLUSTER_COLORS.length];
}

/**
 * Observed waits (dots: within the bound, or above it) against the bound predicted at
 * each job's submission, by submission time, on a log scale of seconds. `jobs` are the
 * API's waits. With `clusters` (`{ labels, of(job) -> index }`), each cluster's bounds
 * are a step line of their own: a job's bound is its cluster's, and one line through
 * every job would jump between the clusters' levels at every other job.
 */
export function waitsChart(container, jobs, previous, clusters = null) {
  if (!jobs.length) {
    if (previous) previous.destroy();
    return empty(container, "No job started in this window.");
  }
  const labels = clusters && clusters.labels.length > 1 ? clusters.labels : null;
  const rows = jobs
    .map((j) => {
      const bound = j.bound_s === null || j.bound_s === undefined ? null : j.bound_s;
      return {
        x: Math.floor(new Date(j.submit).getTime() / 1000),
        // A log axis has no zero: a job that started at once is drawn on the "0 s" line.
        wait: j.wait_s > 0 ? j.wait_s : ZERO_AT,
        above: bound !== null && j.wait_s > bound,
        bound: bound === null ? null : bound > 0 ? bound : ZERO_AT,
        cluster: labels ? clusters.of(j) : 0,
      };
    })
    .sort((a, b) => a.x - b.x);
  const lines = labels ? labels.length : 1;
  const data = [
    rows.map((r) => r.x),
    rows.map((r) => (r.above ? null : r.wait)),
    rows.map((r) => (r.above ? r.wait : null)),
    ...Array.from({ length: lines }, (_l, i) => rows.map((r) => (r.cluster === i ? r.bound : null))),
  ];
  const key = labels ? labels.join("\n") : "";
  // A refresh redraws the chart in place (no flicker, the legend stays where it was),
  // unless the clusters changed.
  if (previous && previous.chart && previous.key === key && container.contains(previous.chart.root)) {
    previous.chart.setData(data);
    return previous;
  }
  if (previous) previous.destroy();
  const fmtWait = (v) => (v === ZERO_AT ? "0 s" : fmtDuration(v));
  // Away from the chart the legend still says something: how many dots a series has,
  // and each bound line's latest level; over it, the values at the cursor.
  const dots = (label, color, size) => ({
    label,
    stroke: color,
    fill: color,
    paths: () => null,
    points: { show: true, size, stroke: color, fill: color },
    value: (u, v, si, idx) => (idx === null || idx === undefined
      ? `${u.data[si].filter((x) => x !== null).length} jobs`
      : v === null ? "—" : fmtWait(v)),
  });
  const latest = (u, si) => {
    const ys = u.data[si];
    for (let i = ys.length - 1; i >= 0; i--) if (ys[i] !== null) return `now ${fmtWait(ys[i])}`;
    return "none";
  };
  const stepped = window.uPlot.paths.stepped({ align: 1 });
  const boundSeries = Array.from({ length: lines }, (_l, i) => ({
    label: labels ? `0.95 bound, ${labels[i]}` : "0.95 bound at submission",
    stroke: labels ? clusterColor(i) : COLORS.bound,
    width: 2,
    paths: stepped,
    // A cluster's bound holds from one of its jobs to the next, whatever other
    // clusters' jobs come between.
    spanGaps: Boolean(labels),
    points: { show: false },
    value: (u, v, si, idx) => (idx === null || idx === undefined ? latest(u, si) : v === null ? "—" : fmtWait(v)),
  }));
  const opts = {
    scales: { x: { time: true }, y: { distr: 3, log: 10, range: durationRange } },
    axes: [
      { stroke: "#374151", grid: { stroke: "#e5e7eb" } },
      { stroke: "#374151", grid: { stroke: "#e5e7eb" }, splits: durationSplits, filter: (_u, splits) => splits, values: durationTicks, size: 64 },
    ],
    series: [
      { label: "submitted", value: (_u, v) => (v === null ? "point at a dot" : fmtTime(v)) },
      dots("wait within its bound", COLORS.wait, 5),
      dots("wait above its bound", COLORS.miss, 6),
      ...boundSeries,
    ],
    legend: { live: true },
    cursor: { points: { size: 8 } },
  };
  return { ...responsive(container, opts, data), key };
}

/**
 * A VARQ plan's probability trajectory by submission time, with the probability asked
 * for, the chosen point, and the worst-case over-allocation (node-hours, right axis).
 */
export function trajectoryChart(container, { trajectory, nodes, startAt, minProbability, chosenAt }, previous) {
  if (previous) previous.destroy();
  if (!trajectory || !trajectory.length) return empty(container, "No trajectory to draw.");
  const xs = trajectory.map((p) => (typeof p.submit_at === "number" ? p.submit_at : Math.floor(new Date(p.submit_at).getTime() / 1000)));
  const probability = trajectory.map((p) => (p.probability === null || p.probability === undefined ? null : p.probability));
  const target = xs.map(() => minProbability);
  const chosen = xs.map((x) => (chosenAt !== null && chosenAt !== undefined && x === chosenAt ? probability[xs.indexOf(x)] : null));
  const overhead = xs.map((x) => (nodes * Math.max(0, startAt - x)) / 3600);
  // Away from the chart the legend shows the plan's point (the chosen submission time),
  // over it the point at the cursor.
  const rest = chosenAt === null || chosenAt === undefined ? -1 : xs.indexOf(chosenAt);
  const shown = (fmt) => (u, v, si, idx) => {
    const value = idx === null || idx === undefined ? (rest < 0 ? null : u.data[si][rest]) : v;
    return value === null || value === undefined ? "—" : fmt(value);
  };
  const opts = {
    scales: { x: { time: true }, y: { range: [0, 1] }, nh: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    axes: [
      { stroke: "#374151", grid: { stroke: "#e5e7eb" } },
      { stroke: "#374151", grid: { stroke: "#e5e7eb" }, label: "probability", values: (_u, vs) => vs.map((v) => `${Math.round(v * 100)} %`) },
      { scale: "nh", side: 1, stroke: COLORS.overhead, grid: { show: false }, label: "over-allocation (node-h)", size: 60 },
    ],
    series: [
      { label: "submit at", value: shown(fmtTime) },
      { label: "probability", stroke: COLORS.probability, width: 2, points: { show: false },
        value: shown((v) => `${(v * 100).toFixed(1)} %`) },
      { label: "asked", stroke: COLORS.target, width: 1.5, dash: [6, 4], points: { show: false },
        value: shown((v) => `${(v * 100).toFixed(0)} %`) },
      { label: "plan", stroke: COLORS.chosen, width: 0, paths: () => null,
        points: { show: true, size: 12, stroke: COLORS.chosen, fill: COLORS.chosen, width: 2 },
        value: shown((v) => `${(v * 100).toFixed(1)} %`) },
      { label: "over-allocation", scale: "nh", stroke: COLORS.overhead, width: 1.5, dash: [2, 3], points: { show: false },
        value: shown((v) => `${v.toFixed(1)} node-h`) },
    ],
    legend: { live: true },
  };
  return responsive(container, opts, [xs, probability, target, chosen, overhead]);
}
