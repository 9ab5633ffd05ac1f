#!/usr/bin/env bash
# npm run bench:instructions -- [me|create] [NAME=VALUE ...]
# The server's own instructions per request, counted by valgrind's callgrind: a measure that the
# machine's speed does not move, where req/s on this VM moved by half from one run to the next.
# Two runs of bin/almoner serve under callgrind on a fresh SQLite file, each with wrk sending a
# fixed number of requests over CONNECTIONS connections (8 by default): WARM, then WARM + MEASURE.
# The difference of their totals, over MEASURE, leaves out start-up and the JIT's warming. User space only: the kernel's
# share (the socket, the fsync) is not counted. Creates vary with batching more than /me does.
# NAME=VALUE pairs go to the server's environment (e.g. LOG_LEVEL=info). Needs valgrind and wrk.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SCENARIO="${1:-me}"
shift || true
WARM="${WARM:-10000}"
MEASURE="${MEASURE:-10000}"
CONNECTIONS="${CONNECTIONS:-8}"
case "$SCENARIO" in
  me) ROUTE=me ;;
  create) ROUTE=donation/create ;;
  *) echo "bench:instructions: the scenario is me or create, not $SCENARIO" >&2; exit 2 ;;
esac
for tool in valgrind wrk; do
  command -v "$tool" >/dev/null || { echo "bench:instructions: needs $tool (apt-get install -y valgrind wrk)" >&2; exit 1; }
done
[ -f "$ROOT/dist/cli/main.js" ] || { echo "bench:instructions: dist/ is missing: npm run build" >&2; exit 1; }

WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
# bench/wrk.lua's requests, ended after exactly LIMIT answers (wrk itself only stops on time).
cat > "$WORK/count.lua" <<LUA
dofile("$ROOT/bench/wrk.lua")
local limit, n, bad = tonumber(os.getenv("LIMIT")), 0, 0
function response(status)
  n = n + 1
  if status ~= 200 then bad = bad + 1 end
  if n >= limit then io.stderr:write("answers " .. n .. " not-200 " .. bad .. "\n"); os.exit(0) end
end
LUA

# Total instructions of a server that answered $1 requests.
total() {
  local count="$1"
  shift
  local dir="$WORK/run-$count"
  mkdir "$dir"
  local db="sqlite:$dir/almoner.db"
  DATABASE_URL="$db" "$ROOT/bin/almoner" charity create --name Bench --email bench@example.org --json > "$dir/charity.json" 2> "$dir/create.stderr"
  local auth
  auth="Basic $(node -e 'const c = JSON.parse(require("fs").readFileSync(process.argv[1])); process.stdout.write(Buffer.from(c.username + ":" + c.password).toString("base64"))' "$dir/charity.json")"
  env DATABASE_URL="$db" PORT=0 HOST=127.0.0.1 LOG_LEVEL=warn CREATE_RATE_LIMIT=0 "$@" \
    valgrind --tool=callgrind --smc-check=all-non-file --callgrind-out-file="$dir/callgrind.out" \
    node "$ROOT/dist/cli/main.js" serve > "$dir/stdout" 2> "$dir/stderr" &
  local server=$! port=
  for _ in $(seq 1200); do
    kill -0 "$server" 2>/dev/null || break
    port="$(grep -ohE 'http://127\.0\.0\.1:[0-9]+' "$dir/stdout" "$dir/stderr" | head -n 1 | cut -d: -f3 || true)"
    [ -n "$port" ] && break
    sleep 0.5
  done
  [ -n "$port" ] || { echo "bench:instructions: the server did not start" >&2; cat "$dir/stderr" >&2; exit 1; }
  LIMIT="$count" BENCH_SCENARIO="$SCENARIO" BENCH_AUTH="$auth" BENCH_MARKER="i$RANDOM" \
    wrk -t1 -c"$CONNECTIONS" -d3600s -s "$WORK/count.lua" "http://127.0.0.1:$port/api/v1/$ROUTE" > "$dir/wrk" 2>&1 || true
  grep -q "not-200 0" "$dir/wrk" || { echo "bench:instructions: not every answer was a 200: $(cat "$dir/wrk")" >&2; exit 1; }
  kill "$server"
  wait "$server" 2>/dev/null || true
  awk '/^totals:/ { print $2 }' "$dir/callgrind.out"
}

server_env=("$@")
first="$(total "$WARM" "${server_env[@]}")"
second="$(total "$((WARM + MEASURE))" "${server_env[@]}")"
echo "$SCENARIO${server_env[*]:+ (${server_env[*]})}: $(( (second - first) / MEASURE )) instructions per request (server, user space; $MEASURE requests after $WARM, $CONNECTIONS connections)"
