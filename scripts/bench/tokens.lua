-- wrk script for the bench's "distinct tokens" rows: every request carries the next token of a file in
-- X-Firebase-AppCheck. Environment (read in each thread's init):
--   BENCH_TOKEN_FILE   one token per line (required)
--   BENCH_TOKEN_START  where to start, as a fraction of the list (default 0): warm-ups start elsewhere than the
--                      measured run, so a measured run never meets a token the warm-up just put in a cache
-- With N threads, thread k walks its own slice [k*n/N, (k+1)*n/N) of the list from that starting point and
-- wraps inside it; done() prints one "bench-tokens:" line per thread (list size, requests, wrap-arounds).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "threads.lua")   -- setup() and done()
bench_tag, bench_items = "bench-tokens", "distinct tokens in its slice"

-- wrk does not tell init how many threads there are: the caller passes -t again as BENCH_WRK_THREADS (default 1)
local function thread_count()
  return tonumber(os.getenv("BENCH_WRK_THREADS") or "1") or 1
end

function init(args)
  local file = os.getenv("BENCH_TOKEN_FILE") or error("BENCH_TOKEN_FILE not set")
  local all, total = {}, 0
  for line in io.lines(file) do
    if #line > 0 then total = total + 1; all[total] = line end
  end
  local lo = math.floor(total * id / thread_count()) + 1
  local hi = math.floor(total * (id + 1) / thread_count())
  tokens, n = {}, 0
  for k = lo, hi do n = n + 1; tokens[n] = all[k] end
  all = nil
  if n == 0 then error("no tokens in " .. file) end
  local start = tonumber(os.getenv("BENCH_TOKEN_START") or "0") or 0
  pos = math.floor(n * start) % n   -- index of the last token used; the next request uses pos + 1
  sent, wraps = 0, 0
  prefix = "GET /bench HTTP/1.1\r\nHost: " .. wrk.host .. ":" .. tostring(wrk.port) .. "\r\nX-Firebase-AppCheck: "
end

function request()
  pos = pos + 1
  if pos > n then pos = 1; wraps = wraps + 1 end
  sent = sent + 1
  return prefix .. tokens[pos] .. "\r\n\r\n"
end
