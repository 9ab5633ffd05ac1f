"""Test Connection: checks the charity's credentials (POST /api/v1/me) with requests.

    ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... python3 me.py

Prints the answer's JSON on stdout. Exits 0 when the credentials work, and non-zero (with the
server's message on stderr) when they do not. Needs requests (pip install requests).
"""
import os
import sys

import requests

base_url = os.environ.get("ALMONER_URL", "http://127.0.0.1:3000").rstrip("/").removesuffix("/api/v1")  # with or without the API's /api/v1
username = os.environ.get("ALMONER_USERNAME")
password = os.environ.get("ALMONER_PASSWORD")
if not username or not password:
    sys.exit("Set ALMONER_USERNAME and ALMONER_PASSWORD to the charity's username and password.")

try:
    response = requests.post(
        f"{base_url}/api/v1/me",
        auth=(username, password),  # HTTP Basic authentication
        headers={"Accept": "application/json"},
        timeout=30,
    )
except requests.RequestException as err:
    sys.exit(f"Could not reach Almoner: {err}")

if not 200 <= response.status_code < 300:
    try:
        answer = response.json()  # Almoner's errors are JSON: {"message": ...}
    except ValueError:
        answer = {}  # not Almoner's answer (a proxy's error page?)
    sys.exit(f"HTTP {response.status_code}: {answer.get('message', response.text)}")  # e.g. HTTP 401: Unauthorized

# {"success":true,"message":"Authenticated","data":{"name":...,"email":...}}
print(response.text)
