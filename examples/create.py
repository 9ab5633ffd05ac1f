"""Create Donation: records a donation (POST /api/v1/donation/create) with requests.

    ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... python3 create.py

Prints the stored record as the server returns it ({"data":{...}}) on stdout. Exits non-zero,
with the server's message (and for a 422 every failing field) on stderr, when it is refused.
Needs requests (pip install requests).
"""
import os
import sys
import uuid

import requests

base_url = os.environ.get("ALMONER_URL", "http://127.0.0.1:3000").rstrip("/").removesuffix("/api/v1")  # with or without the API's /api/v1
username = os.environ.get("ALMONER_USERNAME")
password = os.environ.get("ALMONER_PASSWORD")
if not username or not password:
    sys.exit("Set ALMONER_USERNAME and ALMONER_PASSWORD to the charity's username and password.")

# An Idempotency-Key makes a retry safe: the same key and the same donation within 24 hours get the
# first answer again instead of a second donation. Use a new key for each new donation, and the
# same one to retry it (here: run again with IDEMPOTENCY_KEY set to the key printed).
idempotency_key = os.environ.get("IDEMPOTENCY_KEY") or str(uuid.uuid4())
print(f"Idempotency-Key: {idempotency_key} (to retry this donation, run again with IDEMPOTENCY_KEY={idempotency_key})", file=sys.stderr)

donation = {
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
    "zakat_donation": "yes",
}

try:
    response = requests.post(
        f"{base_url}/api/v1/donation/create",
        auth=(username, password),  # HTTP Basic authentication
        headers={"Accept": "application/json", "Idempotency-Key": idempotency_key},
        json=donation,  # sent as JSON, with Content-Type: application/json
        timeout=30,
    )
except requests.RequestException as err:
    # No answer: the donation may or may not have been recorded, so retry it with the same key.
    sys.exit(f"Could not reach Almoner: {err}")

if not 200 <= response.status_code < 300:
    try:
        answer = response.json()  # Almoner's errors are JSON: {"message": ..., "errors": {...}}
    except ValueError:
        answer = {}  # not Almoner's answer (a proxy's error page?)
    print(f"HTTP {response.status_code}: {answer.get('message', response.text)}", file=sys.stderr)
    # A 422 names every failing field, e.g. donor_email: The donor email is required.
    for field, messages in answer.get("errors", {}).items():
        for text in messages:
            print(f"  {field}: {text}", file=sys.stderr)
    sys.exit(1)

if response.headers.get("Idempotent-Replayed") == "true":
    print("Replayed: this key already recorded this donation; no new donation was made.", file=sys.stderr)

# response.json()["data"] is the donation as stored, with its id: {"data":{"id":1,"donor_first_name":"Jane",...}}
print(response.text)
