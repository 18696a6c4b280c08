// qbets dashboard: calls to the REST API, formatting, and the shared page chrome.
// Plain ES module, no build step. Only the public API (/v1/...) is used.

const TOKEN_KEY = "qbets.token";

/** The API token the user gave, if any (kept in this browser's local storage). */
export function getToken() {
  try {
    return localStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

export function setToken(value) {
  try {
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    /* storage disabled: the token lasts for this page only */
  }
}

/** An answer other than 2xx: the problem+json body when there is one. */
export class ApiError extends Error {
  constructor(status, problem) {
    const detail = (problem && (problem.detail || problem.title)) || `HTTP ${status}`;
    super(detail);
    this.status = status;
    this.problem = problem || {};
  }
}

/** Calls the API; resolves to the parsed JSON body, rejects with an ApiError. */
export async function api(path, { method = "GET", query, body, signal, headers: extra } = {}) {
  let url = path;
  if (query) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
    }
    const text = params.toString();
    if (text) url += (url.includes("?") ? "&" : "?") + text;
  }
  const headers = { Accept: "application/json, application/problem+json", ...extra };
  const token = getToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, { title: "Network error", detail: `cannot reach the service (${e.message})` });
  }
  const type = response.headers.get("Content-Type") || "";
  const json = type.includes("json") ? await response.json().catch(() => null) : null;
  if (!response.ok) throw new ApiError(response.status, json);
  return json;
}

/** Path of a site's queue resource. */
export function queuePath(site, queue) {
  return `/v1/sites/${encodeURIComponent(site)}/queues/${encodeURIComponent(queue)}`;
}

/** Creates an element: el("a", { href: "/" , class: "x"}, "text", child). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on") && typeof v === "function") node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

/** A duration in seconds for people: "45 s", "12 min", "3 h 05 min", "2 d 4 h". */
export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(Number(seconds))) return "—";
  const s = Math.round(Number(seconds));
  if (s < 60) return `${s} s`;
  if (s < 600) {
    const m = Math.floor(s / 60);
    const r = s % 60;
    return r ? `${m} min ${r} s` : `${m} min`;
  }
  // Rounded to the unit shown first, so that 59 min 45 s reads "1 h", not "60 min".
  const minutes = Math.round(s / 60);
  if (minutes < 60) return `${minutes} min`;
  if (minutes < 24 * 60) {
    const h = Math.floor(minutes / 60);
    const m = minutes % 60;
    return m ? `${h} h ${String(m).padStart(2, "0")} min` : `${h} h`;
  }
  const hours = Math.round(s / 3600);
  const d = Math.floor(hours / 24);
  const h = hours % 24;
  return h ? `${d} d ${h} h` : `${d} d`;
}

/** Seconds as the API's walltime text, [D-]HH:MM:SS. */
export function fmtWalltime(seconds) {
  const s = Math.max(0, Math.round(seconds));
  const d = Math.floor(s / 86400);
  const hh = String(Math.floor((s % 86400) / 3600)).padStart(2, "0");
  const mm = String(Math.floor((s % 3600) / 60)).padStart(2, "0");
  const ss = String(s % 60).padStart(2, "0");
  return d ? `${d}-${hh}:${mm}:${ss}` : `${hh}:${mm}:${ss}`;
}

/** Reads "90", "1:30:00", "2-00:00:00" or "45:00" (MM:SS) as seconds; NaN when not a duration. */
export function parseDuration(text) {
  const t = String(text).trim();
  let m = /^(\d+)$/.exec(t);
  if (m) return Number(m[1]);
  m = /^(?:(\d+)-)?(\d+)(?::(\d{1,2}))?(?::(\d{1,2}))?$/.exec(t);
  if (!m) return NaN;
  const [, d, a, b, c] = m;
  let h = 0, min = 0, s = 0;
  if (d !== undefined) {
    h = Number(a); min = Number(b || 0); s = Number(c || 0);
  } else if (c !== undefined) {
    h = Number(a); min = Number(b); s = Number(c);
  } else {
    min = Number(a); s = Number(b || 0);
  }
  return Number(d || 0) * 86400 + h * 3600 + min * 60 + s;
}

/** An RFC 3339 time for people, in the browser's time zone. */
export function fmtTime(iso) {
  if (!iso) return "—";
  const date = typeof iso === "number" ? new Date(iso * 1000) : new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
  });
}

/** Unix seconds of an RFC 3339 time. */
export function unix(iso) {
  return Math.floor(new Date(iso).getTime() / 1000);
}

/** Unix seconds as RFC 3339 UTC without fractions. */
export function iso(seconds) {
  return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function fmtPercent(p, digits = 0) {
  if (p === null || p === undefined || !Number.isFinite(Number(p))) return "—";
  return `${(Number(p) * 100).toFixed(digits)} %`;
}

/**
 * A lower bound on a probability as a percentage, rounded down to a tenth so that
 * it never claims more than it is (0.949 is "94.9 %", 0.9999 is "99.9 %", not 100).
 */
export function fmtPercentAtLeast(p) {
  return fmtPercent(p === null || p === undefined ? p : Math.floor(Number(p) * 1000) / 1000, 1);
}

export function fmtCount(n) {
  if (n === null || n === undefined) return "—";
  return Number(n).toLocaleString();
}

/** Text for a status of a bound or a queue. */
export function statusText(status) {
  switch (status) {
    case "ok":
    case "up":
      return "up";
    case "maybe_down":
      return "maybe down";
    case "insufficient_history":
      return "too little history";
    case "exceeds_limits":
      return "beyond the queue's limits";
    default:
      return status ? String(status).replaceAll("_", " ") : "—";
  }
}

/** Shows an error (or clears it) in a role=alert element. */
export function showError(node, error) {
  if (!error) {
    node.replaceChildren();
    node.hidden = true;
    return;
  }
  const p = error.problem || {};
  const text = error instanceof Error ? error.message : String(error);
  const next = el("div", {}, el("strong", {}, p.title || "Error"), text ? ` ${text}` : "");
  if (Array.isArray(p.errors) && p.errors.length) {
    next.append(el("ul", {}, p.errors.map((f) => el("li", {}, el("code", {}, f.field), ": ", f.detail))));
  }
  // The same error again (a refresh while the service is still down) is left as it
  // is: an alert region announces every change to it.
  if (!node.hidden && node.innerHTML === next.innerHTML) return;
  node.replaceChildren(...next.childNodes);
  node.hidden = false;
}

/** The header: navigation and the optional API token. */
export function initChrome(current) {
  const header = document.querySelector("header.site");
  if (!header) return;
  const links = [
    ["overview", "/ui/", "Overview"],
    ["reservations", "/ui/reservations.html", "Reservations"],
    ["advice", "/ui/advice.html", "Which shape"],
    ["docs", "/docs", "API"],
  ];
  const nav = el(
    "nav", { "aria-label": "Main" },
    el("ul", {}, links.map(([key, href, text]) =>
      el("li", {}, el("a", { href, "aria-current": key === current ? "page" : null }, text)))),
  );
  const input = el("input", {
    id: "token", type: "password", autocomplete: "off", spellcheck: "false",
    placeholder: "qbets_…", value: getToken(),
  });
  const saved = el("span", { class: "muted", role: "status" });
  const form = el(
    "form", { class: "token", onsubmit: (e) => {
      e.preventDefault();
      setToken(input.value.trim());
      saved.textContent = input.value.trim() ? "saved" : "cleared";
      summary.textContent = getToken() ? "Token set" : "Token";
      document.dispatchEvent(new CustomEvent("qbets:token"));
    } },
    el("label", { for: "token" }, "API token"),
    input,
    el("button", { type: "submit" }, "Use"),
    saved,
  );
  const summary = el("summary", {}, getToken() ? "Token set" : "Token");
  const details = el("details", { class: "token-box" },
    summary, form,
    el("p", { class: "muted small" },
      "Needed where reads are protected, and to make reservations. Kept in this browser only."));
  header.append(
    el("a", { class: "brand", href: "/ui/" }, el("img", { src: "/ui/favicon.svg", alt: "", width: 24, height: 24 }), "qbets"),
    nav, details,
  );
}

/** Runs `task` now and every `seconds` while the page is visible and not paused. */
export function every(seconds, task, toggle) {
  let timer = null;
  let paused = false;
  const schedule = () => {
    clearTimeout(timer);
    if (!paused) timer = setTimeout(run, seconds * 1000);
  };
  // One run at a time: a run asked for meanwhile (the tab shown again, a new token)
  // follows the current one instead of overlapping it.
  let running = false;
  let asked = false;
  const run = async () => {
    if (document.hidden) return schedule();
    if (running) {
      asked = true;
      return;
    }
    running = true;
    try {
      await task();
    } finally {
      running = false;
      if (asked) {
        asked = false;
        run();
      } else {
        schedule();
      }
    }
  };
  if (toggle) {
    toggle.addEventListener("click", () => {
      paused = !paused;
      toggle.setAttribute("aria-pressed", String(paused));
      toggle.textContent = paused ? "Resume auto-refresh" : "Pause auto-refresh";
      if (!paused) run();
      else clearTimeout(timer);
    });
  }
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !paused) run();
  });
  run();
  return { refresh: run };
}
