// Test Connection: checks the charity's credentials with Almoner's typed client (almoner/client).
//
//   ALMONER_USERNAME=helping-hands-k3x9q2 ALMONER_PASSWORD=... npx tsx client-me.ts
//
// Prints the charity's name and e-mail as JSON on stdout. Exits 0 when the credentials work, and
// non-zero (with the server's message on stderr) when they do not.
//
// almoner/client is not on the npm registry, and the registry's "almoner" is someone else's: never
// `npm install almoner`. Install it from a copy of Almoner your operator gives you, built with
// `npm ci`: `npm install /path/to/almoner` (it links that folder). This file uses top-level
// `await`, so your project must be an ES module: `npm pkg set type=module` (npm init -y makes a
// CommonJS one, where tsx stops: "Top-level await is currently not supported with the "cjs"
// output format"), or name the file .mts. Then `npm install -D tsx` and run it as above.
import { AlmonerClient, AlmonerError } from 'almoner/client';

const { ALMONER_URL = 'http://127.0.0.1:3000', ALMONER_USERNAME, ALMONER_PASSWORD } = process.env;
if (!ALMONER_USERNAME || !ALMONER_PASSWORD) {
  console.error("Set ALMONER_USERNAME and ALMONER_PASSWORD to the charity's username and password.");
  process.exit(1);
}

const almoner = new AlmonerClient({
  baseUrl: ALMONER_URL,
  username: ALMONER_USERNAME,
  password: ALMONER_PASSWORD,
  timeoutMs: 30_000,
});

try {
  const charity = await almoner.me(); // { name: 'Helping Hands', email: 'info@helpinghands.example' }
  console.log(JSON.stringify(charity));
} catch (err) {
  if (!(err instanceof AlmonerError)) throw err;
  // An AuthenticationError (401) when the credentials are wrong; status 0 when there was no answer.
  console.error(err.status ? `HTTP ${err.status}: ${err.message}` : err.message);
  process.exit(1);
}
