--[[
contrib/slurm/cli_filter.lua: a qbets hint at submission time. Slurm runs this
cli_filter on the user's side of sbatch and salloc (and srun outside a job), after the
options are read and before the job is sent. It asks a qbets server how long jobs of
this shape wait and prints one line on stderr, e.g.

  qbets: 95% of jobs like this start within 41 min on `normal` (12 jobs waiting); `long` within 9 min

It never blocks or fails a submission: every path returns slurm.SUCCESS, the request
has a short timeout (timeout_s), and anything unexpected (qbets down or slow, curl
missing, an answer it cannot read) gives no hint.

Install (Slurm 21.08 or later, built with Lua; Debian 12's slurm-wlm-basic-plugins has
cli_filter_lua.so):
  1. copy this file beside slurm.conf on the login nodes, named cli_filter.lua;
  2. add `CliFilterPlugins=cli_filter/lua` to slurm.conf there (only the client
     commands read it; no daemon restart);
  3. set `site` and `url` below (or QBETS_SITE and QBETS_URL in users' environment).
Users opt out with QBETS_HINT=0. Reads must be open to anonymous callers (qbets's
default), or give curl a config file holding the token (curl_config below).
Needs curl on the login nodes. Tested by `cargo test --test it cli::the_sbatch_hint`.
]]

local qbets = {
  -- The qbets server and the name it knows this cluster by.
  url = os.getenv("QBETS_URL") or "http://127.0.0.1:8080",
  site = os.getenv("QBETS_SITE") or "local",
  -- Seconds for the whole exchange (two requests, connections included).
  timeout_s = tonumber(os.getenv("QBETS_HINT_TIMEOUT") or "") or 2,
  -- The partition of a job that names none (Slurm's Default=YES one); nil: the hint
  -- then names the queue that waits least.
  default_partition = os.getenv("QBETS_DEFAULT_PARTITION"),
  -- The walltime of a job that asks for none, per partition (Slurm's DefaultTime),
  -- e.g. { debug = "00:10:00", long = "01:00:00" }; without one, no hint.
  default_time = {},
  -- A curl config file (`curl -K`), e.g. with `header = "Authorization: Bearer …"`.
  curl_config = os.getenv("QBETS_CURL_CONFIG"),
}

-- Names that are safe inside a single-quoted shell word and a URL path.
local function plain(s)
  return type(s) == "string" and s ~= "" and #s <= 128 and s:match("^[%w._-]+$") ~= nil
end

local function quoted(s)
  if s:find("'", 1, true) then return nil end
  return "'" .. s .. "'"
end

-- A duration for people, rounded up as `qbets bound` does: 45 s, 41 min, 2 h 05 min, 3 d 4 h.
local function human(s)
  if s < 60 then return string.format("%d s", s) end
  local m = math.ceil(s / 60)
  if m < 60 then return string.format("%d min", m) end
  if m < 24 * 60 then return string.format("%d h %02d min", math.floor(m / 60), m % 60) end
  local h = math.ceil(s / 3600)
  local d, rest = math.floor(h / 24), h % 24
  if rest == 0 then return string.format("%d d", d) end
  return string.format("%d d %d h", d, rest)
end

-- Slurm's time as cli_filter gives it ([D-]HH:MM:SS) to seconds; nil when unset
-- (Slurm shows an unset limit as an enormous one).
local function seconds(t)
  if type(t) ~= "string" then return nil end
  local d, rest = t:match("^(%d+)-(.*)$")
  d = tonumber(d) or 0
  rest = rest or t
  local parts = {}
  for p in rest:gmatch("[^:]+") do
    if not p:match("^%d+$") then return nil end
    parts[#parts + 1] = tonumber(p)
  end
  local h, m, s
  if #parts == 3 then h, m, s = parts[1], parts[2], parts[3]
  elseif #parts == 2 then h, m, s = 0, parts[1], parts[2]
  elseif #parts == 1 and d > 0 then h, m, s = parts[1], 0, 0
  elseif #parts == 1 then h, m, s = 0, parts[1], 0 -- plain minutes
  else return nil end
  local total = ((d * 24 + h) * 60 + m) * 60 + s
  if total < 1 or total > 366 * 86400 then return nil end
  return total
end

-- GET path; the body (one line of JSON) or nil. Each request may take half the
-- budget, so the two a hint needs stay within timeout_s together.
local function fetch(path)
  local t = tostring(qbets.timeout_s / 2)
  local u = quoted(qbets.url:gsub("/+$", "") .. path)
  if not u then return nil end
  local cmd = { "curl", "-sS", "--fail", "--max-time", t, "--connect-timeout", t,
                "-H", "'Accept: application/json'" }
  if qbets.curl_config then
    local c = quoted(qbets.curl_config)
    if not c then return nil end
    cmd[#cmd + 1] = "-K"
    cmd[#cmd + 1] = c
  end
  cmd[#cmd + 1] = u
  local f = io.popen(table.concat(cmd, " ") .. " 2>/dev/null", "r")
  if not f then return nil end
  local body = f:read("*a")
  f:close()
  if body == nil or body == "" then return nil end
  return body
end

local function hint(options)
  if os.getenv("QBETS_HINT") == "0" then return nil end
  local kind = options.type
  -- srun inside a job starts a step, not a job: no hint there.
  if kind == "srun" and os.getenv("SLURM_JOB_ID") then return nil end
  if kind ~= "sbatch" and kind ~= "salloc" and kind ~= "srun" then return nil end
  if not plain(qbets.site) then return nil end

  local partition = options.partition
  if partition == nil or partition == "" then partition = qbets.default_partition end
  -- A list of partitions: the first one is asked about, the others are alternatives.
  if partition then partition = partition:match("^([^,]+)") end
  if partition and not plain(partition) then return nil end

  local nodes = tonumber(tostring(options.nodes or "1"):match("^(%d+)")) or 1
  if nodes < 1 then nodes = 1 end
  local walltime = seconds(options.time)
  if not walltime and partition then walltime = seconds(qbets.default_time[partition]) end
  if not walltime then return nil end

  local answer = fetch(string.format("/v1/bounds?nodes=%d&walltime=%d", nodes, walltime))
  if not answer then return nil end

  -- The bounds, shortest first as the server orders them, of this site's queues.
  local bounds, mine = {}, nil
  for site, queue, quantile, status, bound in answer:gmatch(
      '"site":"([^"]*)","queue":"([^"]*)".-"quantile":([%d.e-]+).-"status":"([^"]*)","bound_s":(%w+)') do
    if site == qbets.site then
      local b = { queue = queue, quantile = tonumber(quantile), status = status, bound = tonumber(bound) }
      bounds[#bounds + 1] = b
      if queue == partition then mine = b end
    end
  end
  if #bounds == 0 then return nil end
  -- Jobs waiting per queue: a second request, only when the first was answered.
  local waiting = {}
  for name, pending in (fetch("/v1/sites/" .. qbets.site .. "/queues") or ""):gmatch('"name":"([^"]*)".-"pending":(%d+)') do
    waiting[name] = tonumber(pending)
  end

  local best
  for _, b in ipairs(bounds) do
    if b.bound and (not mine or b.queue ~= mine.queue) then best = b; break end
  end
  local function share(b) return string.format("%g%%", math.floor(b.quantile * 1000 + 0.5) / 10) end
  local text
  if mine and mine.bound then
    text = string.format("%s of jobs like this start within %s on `%s`", share(mine), human(mine.bound), mine.queue)
    if waiting[mine.queue] then text = text .. string.format(" (%d jobs waiting)", waiting[mine.queue]) end
    if best and best.bound < mine.bound then
      text = text .. string.format("; `%s` within %s", best.queue, human(best.bound))
    end
  elseif mine then
    local why = mine.status == "maybe_down" and "it may be down" or "too little history"
    text = string.format("no bound for `%s` (%s)", mine.queue, why)
    if best then text = text .. string.format("; `%s`: %s within %s", best.queue, share(best), human(best.bound)) end
  elseif best then
    text = string.format("%s of jobs like this start within %s on `%s`", share(best), human(best.bound), best.queue)
    if partition then text = text .. string.format(" (qbets has no bound for `%s`)", partition) end
  else
    return nil
  end
  return "qbets: " .. text
end

function slurm_cli_setup_defaults(options, early_pass)
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, pack_offset)
  -- One hint per submission, not one per component of a heterogeneous job.
  if pack_offset ~= nil and pack_offset > 0 then return slurm.SUCCESS end
  local ok, line = pcall(hint, options)
  if ok and line then
    pcall(function() io.stderr:write(line .. "\n") end)
  end
  return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
  return slurm.SUCCESS
end
