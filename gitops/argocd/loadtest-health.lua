-- Argo CD health check for stampede.dev/LoadTest (resource.customizations.health.stampede.dev_LoadTest).
-- Phases (crates/stampede-api): Pending -> Initializing -> Running -> Succeeded | Failed | Aborted.
-- Progressing while the test has not finished, Healthy when it succeeded, Degraded when it failed,
-- was aborted or its spec is invalid (condition Valid=False). Plain Lua 5.1, as Argo CD runs it.
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
if status == nil or not nonempty(status.phase) then
  hs.status = "Progressing"
  hs.message = "Waiting for the Stampede operator to accept the LoadTest"
  return hs
end

local phase = status.phase
local message = phase
if nonempty(status.message) then
  message = status.message
end

local valid = condition(status, "Valid")
if valid ~= nil and valid.status == "False" then
  hs.status = "Degraded"
  if nonempty(valid.message) then
    hs.message = "Invalid spec: " .. valid.message
  else
    hs.message = message
  end
  return hs
end

if phase == "Succeeded" then
  hs.status = "Healthy"
elseif phase == "Failed" or phase == "Aborted" then
  hs.status = "Degraded"
elseif phase == "Pending" or phase == "Initializing" or phase == "Running" then
  hs.status = "Progressing"
else
  hs.status = "Unknown"
  message = "Unknown phase " .. phase .. ": " .. message
end
hs.message = message
return hs
