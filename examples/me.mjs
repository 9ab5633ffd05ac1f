// Test Connection: checks the charity's credentials (POST /api/v1/me) with Node's built-in fetch.
//
//   ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... node me.mjs
//
// Prints the answer's JSON on stdout. Exits 0 when the credentials work, and non-zero (with the
// server's message on stderr) when they do not. Node 18 or later; no dependencies.
const baseUrl = (process.env.ALMONER_URL || 'http://127.0.0.1:3000').replace(/\/+$/, '').replace(/\/api\/v1$/, ''); // the server, with or without the API's /api/v1
const { ALMONER_USERNAME: username, ALMONER_PASSWORD: password } = process.env;
if (!username || !password) {
  console.error("Set ALMONER_USERNAME and ALMONER_PASSWORD to the charity's username and password.");
  process.exit(1);
}

let response, body;
try {
  response = await fetch(`${baseUrl}/api/v1/me`, {
    method: 'POST',
    headers: {
      Accept: 'application/json',
      Authorization: `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`,
    },
    signal: AbortSignal.timeout(30_000), // for the whole answer, body included
  });
  body = await response.text();
} catch (err) {
  console.error(`Could not reach Almoner: ${err.cause?.message ?? err.message}`);
  process.exit(1);
}

if (!response.ok) {
  let message = body;
  try {
    message = JSON.parse(body).message ?? body; // Almoner's errors are JSON: {"message": ...}
  } catch {} // not Almoner's answer (a proxy's error page?)
  console.error(`HTTP ${response.status}: ${message}`); // e.g. HTTP 401: Unauthorized
  process.exit(1);
}

// {"success":true,"message":"Authenticated","data":{"name":...,"email":...}}
console.log(body);
