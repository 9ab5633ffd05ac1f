-- wrk script for the Almoner benchmark (see load.ts). Environment:
--   BENCH_SCENARIO  "me" (a fixed request: /me and the ceiling) or "create" (varied donations)
--   BENCH_AUTH      the Authorization header value
--   BENCH_MARKER    create only: prefix of the unique per-request marker
--   BENCH_KEYED     create only: "1" for a fresh Idempotency-Key (the marker) on every request, else none
--   BENCH_QUANTILES the percentiles done() reports the latency at, comma-separated (load.ts's QUANTILES)
-- done() prints one line "BENCH_RESULT {json}" for load.ts.
local scenario = os.getenv("BENCH_SCENARIO") or "me"
wrk.method = "POST"
wrk.headers["Authorization"] = os.getenv("BENCH_AUTH")
wrk.headers["Accept"] = "application/json"

local threads = {}
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

-- Only the create scenario defines request(): without it wrk sends one prebuilt request, faster.
if scenario == "create" then
  local FIRST = { "Jane", "John", "Amira", "Yusuf", "Mei", "Olu", "Sven", "Priya", "Carlos", "Fatima", "Liam", "Chen" }
  local LAST = { "Doe", "Smith", "Khan", "Okafor", "Nguyen", "Garcia", "Jensen", "Patel", "Rossi", "Haddad" }
  local CITIES = { "London", "Leeds", "Bristol", "Glasgow", "Cardiff", "Belfast", "Leicester" }
  local TYPES = { "one-time", "recurring", "renewal" }
  local METHODS = { "cash", "card", "bank transfer", "cheque" }
  local ZAKAT = { '"yes"', '"no"', "true", "false" }
  local marker = os.getenv("BENCH_MARKER")
  local keyed = os.getenv("BENCH_KEYED") == "1"
  local random = math.random
  local function pick(list) return list[random(#list)] end

  sent = 0 -- a global, so that done() can read it from each thread

  function init(args)
    math.randomseed(os.time() * 1000 + tid)
  end

  -- A valid donation, different every time; its marker goes into payment_confirmation_number
  -- and, in the keyed run, into the Idempotency-Key header (as in autocannon.mjs).
  function request()
    sent = sent + 1
    local mark = marker .. "-" .. (tid or 0) .. "-" .. sent -- tid is nil when wrk checks the request in its main state
    local first, last = pick(FIRST), pick(LAST)
    local amount
    if random() < 0.7 then
      amount = string.format('"%d.%02d"', random(1, 5000), random(0, 99))
    else
      amount = tostring(random(1, 500))
    end
    local date = ""
    if random() < 0.8 then
      date = string.format(',"donation_date":"%02d-%02d-%d"', random(1, 28), random(1, 12), random(2015, 2025))
    end
    local phone = "null"
    if random() < 0.5 then phone = string.format('"07700 9%05d"', random(10000, 99999)) end
    local ip = ""
    if random() < 0.5 then ip = "203.0.113." .. random(1, 254) end
    local body = string.format(
      '{"donor_first_name":"%s","donor_last_name":"%s","donor_email":"%s.%s.%d@example.org",' ..
      '"donor_phone":%s,"donor_address":"%d High Street","donor_city":"%s","donor_postcode":"SW%d %dAA",' ..
      '"donor_ip":"%s","gift_aid":"%s","amount":%s,"payment_method":"%s","payment_confirmation_number":"%s",' ..
      '"donation_type":"%s","zakat_donation":%s%s}',
      first, last, first:lower(), last:lower(), random(1, 1000000),
      phone, random(1, 300), pick(CITIES), random(1, 20), random(1, 9),
      ip, random() < 0.5 and "yes" or "no", amount, pick(METHODS), mark,
      pick(TYPES), pick(ZAKAT), date)
    local headers = {
      ["Authorization"] = wrk.headers["Authorization"],
      ["Accept"] = "application/json",
      ["Content-Type"] = "application/json",
    }
    if keyed then headers["Idempotency-Key"] = mark end
    return wrk.format(nil, nil, headers, body)
  end
end

function done(summary, latency, requests)
  -- The latency at each of BENCH_QUANTILES' percentiles, so that the latencies of several short
  -- runs can be merged (bench/run.ts measures in slices).
  local at = {}
  for p in string.gmatch(os.getenv("BENCH_QUANTILES") or "", "[^,]+") do
    p = tonumber(p)
    -- wrk's percentile(100) answers 0: the 100th is its maximum.
    at[#at + 1] = string.format("%d", p >= 100 and latency.max or latency:percentile(p))
  end
  local sent = nil
  if scenario == "create" then
    sent = 0
    for _, thread in ipairs(threads) do sent = sent + thread:get("sent") end
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"seconds":%f,"responses":%d,"status_errors":%d,"connect":%d,"read":%d,"write":%d,"timeout":%d,' ..
    '"sent":%s,"p50_us":%d,"p99_us":%d,"mean_us":%f,"quantiles_us":[%s]}\n',
    summary.duration / 1e6, summary.requests, e.status, e.connect, e.read, e.write, e.timeout,
    sent and tostring(sent) or "null", latency:percentile(50), latency:percentile(99), latency.mean, table.concat(at, ",")))
end
