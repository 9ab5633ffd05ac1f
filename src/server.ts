// The server process: config -> store -> app -> listen, and a clean stop on SIGTERM/SIGINT.
import type { Config } from './config.js';
import { buildApp } from './app.js';
import { openStore } from './store/open.js';

export async function serve(config: Config): Promise<void> {
  const store = await openStore(config.database);
  const app = await buildApp({ store, logger: { level: config.logLevel } });

  let stopping = false;
  const stop = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down: finishing requests in flight');
    const deadline = setTimeout(() => {
      app.log.error('shutdown took longer than 10 s; exiting');
      process.exit(1);
    }, 10_000);
    deadline.unref();
    try {
      await app.close(); // stops accepting, waits for requests in flight
      await store.close();
      process.exit(0);
    } catch (err) {
      app.log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);

  await app.listen({ port: config.port, host: config.host });

  if ((await store.countCharities()) === 0) {
    process.stderr.write(
      'Almoner has no charities yet. Create the first one with:\n' +
        '  bin/almoner charity create --name "Helping Hands" --email info@helpinghands.example\n',
    );
  }
}
