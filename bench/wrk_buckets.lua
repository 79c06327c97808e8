-- wrk script for bench/ferrotrace_yaws.erl: counts the responses completed in each 100 ms
-- of wall-clock time (CLOCK_REALTIME through LuaJIT's ffi, to line up with the node's
-- os:system_time/1), printed at the end as "bucket <realtime ms div 100> <responses>".
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } ft_timespec;
int clock_gettime(int clk, ft_timespec *tp);
]]
local ts = ffi.new("ft_timespec")
local function now_ms()
  ffi.C.clock_gettime(0, ts)
  return tonumber(ts.tv_sec) * 1000 + math.floor(tonumber(ts.tv_nsec) / 1000000)
end
counts = {}
response = function(status, headers, body)
  local b = math.floor(now_ms() / 100)
  counts[b] = (counts[b] or 0) + 1
end
local threads = {}
setup = function(thread) table.insert(threads, thread) end
done = function(summary, latency, requests)
  local all = {}
  for _, t in ipairs(threads) do
    for b, n in pairs(t:get("counts")) do all[b] = (all[b] or 0) + n end
  end
  local keys = {}
  for b, _ in pairs(all) do table.insert(keys, b) end
  table.sort(keys)
  for _, b in ipairs(keys) do io.write(string.format("bucket %d %d\n", b, all[b])) end
end
