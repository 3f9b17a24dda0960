-- Shared by the bench's wrk scripts, which dofile it: setup() numbers the threads (the global `id` in each thread:
-- 0, 1, …), and done() prints one line per thread from the globals each script keeps up to date in its threads,
-- n (entries it walks), sent (requests built) and wraps (times it started over), as
--   <bench_tag>: thread <id>: <n> <bench_items>, <sent> requests built, <wraps> wrap-arounds
-- where bench_tag and bench_items are set by the script at load time.
local threads = {}

function setup(thread)
  thread:set("id", #threads)
  table.insert(threads, thread)
end

function done(summary, latency, requests)
  for _, t in ipairs(threads) do
    io.write(string.format("%s: thread %d: %d %s, %d requests built, %d wrap-arounds\n",
      bench_tag, t:get("id"), t:get("n"), bench_items, t:get("sent"), t:get("wraps")))
  end
end
