-- wrk script for the bench's App Attest row: thread k is simulated device k. Run it with -t N -c N (one connection
-- per thread), so each device's requests go out one after the other and its counters arrive in increasing order.
-- Environment (read in each thread's init):
--   BENCH_AA_DIR      holds assert-<k>.jsonl per thread k (0-based): lines of `attest-gateway dev appattest assert`,
--                     each a flat JSON object of headers (key id, assertion, timestamp), counters increasing
--   BENCH_AA_FIRST    first line to send (1-based), BENCH_AA_LAST last one: the warm-up and the measured run take
--                     disjoint ranges of the same lists, so a measured run never sends a counter the store has seen
-- A thread that reaches BENCH_AA_LAST (or the end of its file) starts over at BENCH_AA_FIRST: those counters are
-- replays, which the gateway rejects (401), so the caller must treat any wrap-around as a failed run. done() prints
-- one "bench-appattest:" line per thread (assertions in its range, requests built, wrap-arounds).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "threads.lua")   -- setup() and done()
bench_tag, bench_items = "bench-appattest", "assertions in its range"

-- init must stay cheap: wrk runs each thread's init and starts that thread before the next thread's init, and starts
-- its clock after the last one, so a slow init (reading a whole list takes ~10 ms, more once threads run beside it on
-- the core) lets the first threads load the gateway before the clock starts, and the run counts those requests too.
-- So init only opens the file and skips to the range; request() reads one line at a time.
function init(args)
  local dir = os.getenv("BENCH_AA_DIR") or error("BENCH_AA_DIR not set")
  local first = tonumber(os.getenv("BENCH_AA_FIRST") or "1") or 1
  local last = tonumber(os.getenv("BENCH_AA_LAST") or "") or math.huge
  file = dir .. "/assert-" .. tostring(id) .. ".jsonl"
  f = assert(io.open(file, "r"))
  for _ = 2, first do
    if not f:read("*l") then error(file .. " has fewer than " .. first .. " lines") end
  end
  start = f:seek()   -- byte offset of line `first`
  n = last - first + 1
  left = n           -- lines of the range not yet sent
  sent, wraps = 0, 0
  prefix = "GET /bench HTTP/1.1\r\nHost: " .. wrk.host .. ":" .. tostring(wrk.port) .. "\r\n"
end

-- The range ends at line BENCH_AA_LAST or at the end of the file, whichever comes first; then it starts over.
-- (wrk calls thread 0's request() once more, in its main thread, to check the request: that line is skipped,
-- which leaves a gap in thread 0's counters, never a repeat.)
function request()
  local line = left > 0 and f:read("*l") or nil
  if not line then
    f:seek("set", start); left, wraps = n, wraps + 1
    line = f:read("*l") or error(file .. ": no line at the start of the range")
  end
  left = left - 1
  sent = sent + 1
  local headers = {}
  for name, value in line:gmatch('"([%w%-]+)":"([^"]*)"') do
    headers[#headers + 1] = name .. ": " .. value .. "\r\n"
  end
  if #headers == 0 then error(file .. ": a line without headers: " .. line) end
  return prefix .. table.concat(headers) .. "\r\n"
end
