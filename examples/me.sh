#!/usr/bin/env bash
# Test Connection: checks the charity's credentials (POST /api/v1/me) with curl.
#
#   ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... bash me.sh
#
# Prints the answer's JSON on stdout. Exits 0 when the credentials work, and non-zero (with the
# server's message on stderr) when they do not.
set -euo pipefail

url="${ALMONER_URL:-http://127.0.0.1:3000}"
url="${url%/}"; url="${url%/api/v1}" # the server, with or without the API's /api/v1
: "${ALMONER_USERNAME:?set it to the username of the charity}"
: "${ALMONER_PASSWORD:?set it to the password of the charity}"

# -u sends HTTP Basic authentication. -w adds the status code on a line of its own after the body.
# (On a machine shared with others, keep the password out of the process list with --netrc-file.)
response=$(curl -sS --max-time 30 -X POST "${url%/}/api/v1/me" \
  -u "$ALMONER_USERNAME:$ALMONER_PASSWORD" \
  -H 'Accept: application/json' \
  -w '\n%{http_code}')
status="${response##*$'\n'}"
body="${response%$'\n'*}"

if [[ "$status" != 2?? ]]; then
  echo "HTTP $status: $body" >&2 # e.g. HTTP 401: {"message":"Unauthorized"}
  exit 1
fi
echo "$body"
