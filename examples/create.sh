#!/usr/bin/env bash
# Create Donation: records a donation (POST /api/v1/donation/create) with curl.
#
#   ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... bash create.sh
#
# Prints the stored record as the server returns it ({"data":{...}}) on stdout. Exits non-zero,
# with the server's message (and for a 422 every failing field) on stderr, when it is refused.
set -euo pipefail

url="${ALMONER_URL:-http://127.0.0.1:3000}"
url="${url%/}"; url="${url%/api/v1}" # the server, with or without the API's /api/v1
: "${ALMONER_USERNAME:?set it to the username of the charity}"
: "${ALMONER_PASSWORD:?set it to the password of the charity}"

# An Idempotency-Key makes a retry safe: the same key and the same donation within 24 hours get the
# first answer again instead of a second donation. A fresh UUID for each new donation (the kernel's
# on Linux, uuidgen elsewhere); to retry, run again with IDEMPOTENCY_KEY set to the key printed.
key="${IDEMPOTENCY_KEY:-$(cat /proc/sys/kernel/random/uuid 2>/dev/null || uuidgen)}"
echo "Idempotency-Key: $key (to retry this donation, run again with IDEMPOTENCY_KEY=$key)" >&2

donation='{
  "donor_first_name": "Jane",
  "donor_last_name": "Doe",
  "donor_email": "jane.doe@example.com",
  "donor_address": "12 High Street",
  "donor_city": "London",
  "donor_postcode": "SW1A 1AA",
  "donor_ip": "",
  "gift_aid": "yes",
  "amount": "25.00",
  "payment_method": "cash",
  "payment_confirmation_number": "",
  "donation_type": "one-time",
  "donation_date": "25-02-2021",
  "zakat_donation": "yes"
}'

headers=$(mktemp)
trap 'rm -f "$headers"' EXIT

# -u sends HTTP Basic authentication, -D keeps the answer's headers, and -w adds the status code on
# a line of its own after the body.
response=$(curl -sS --max-time 30 -X POST "${url%/}/api/v1/donation/create" \
  -u "$ALMONER_USERNAME:$ALMONER_PASSWORD" \
  -H 'Accept: application/json' \
  -H 'Content-Type: application/json' \
  -H "Idempotency-Key: $key" \
  --data-binary "$donation" \
  -D "$headers" \
  -w '\n%{http_code}')
status="${response##*$'\n'}"
body="${response%$'\n'*}"

if [[ "$status" != 2?? ]]; then
  echo "HTTP $status: $body" >&2 # a 422 lists every failing field under "errors"
  exit 1
fi
if grep -qi '^Idempotent-Replayed: *true' "$headers"; then
  echo "Replayed: this key already recorded this donation; no new donation was made." >&2
fi
echo "$body"
