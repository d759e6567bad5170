-- Argo CD health check for stampede.dev/LoadTestSchedule
-- (resource.customizations.health.stampede.dev_LoadTestSchedule).
-- Degraded when the schedule or time zone is invalid (condition Valid=False); Suspended while
-- spec.suspend is true; Progressing until a first run has finished; then Healthy when the last
-- finished run passed (status.lastRun.verdict Passed) and Degraded when it failed or was aborted.
-- Runs in progress do not change it: the last verdict stands until the next one.
-- Plain Lua 5.1, as Argo CD runs it.
local hs = {}

local function condition(status, type_)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == type_ then
      return c
    end
  end
  return nil
end

local function nonempty(s)
  return s ~= nil and s ~= ""
end

local status = obj.status
if status == nil then
  status = {}
end

local valid = condition(status, "Valid")
if valid ~= nil and valid.status == "False" then
  hs.status = "Degraded"
  if nonempty(valid.message) then
    hs.message = "Invalid schedule: " .. valid.message
  else
    hs.message = "Invalid schedule"
  end
  return hs
end

if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "Suspended: no new runs are created"
  return hs
end

local last = status.lastRun
if last == nil then
  hs.status = "Progressing"
  if status.active ~= nil and status.active[1] ~= nil then
    hs.message = "No run has finished yet; running " .. status.active[1]
  elseif nonempty(status.nextScheduleTime) then
    hs.message = "No run has finished yet; the first is due at " .. status.nextScheduleTime
  else
    hs.message = "No run has finished yet"
  end
  return hs
end

local name = "the last run"
if nonempty(last.name) then
  name = "LoadTest " .. last.name
end
local verdict = last.verdict
if not nonempty(verdict) then
  verdict = "(none)"
end
local message = "Last run, " .. name .. ": " .. verdict
if nonempty(last.p99) then
  message = message .. ", p99 " .. last.p99
end
if verdict ~= "Passed" and nonempty(last.message) then
  message = message .. ": " .. last.message
end

if verdict == "Passed" then
  hs.status = "Healthy"
elseif verdict == "Failed" or verdict == "Aborted" then
  hs.status = "Degraded"
else
  hs.status = "Unknown"
end
hs.message = message
return hs
