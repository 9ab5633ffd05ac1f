// node-postgres's Client as Almoner opens every PostgreSQL connection, alone or as a pool's.
import type pg from 'pg';

type Connect = (callback?: (err: Error | undefined) => void) => Promise<void> | void;

/**
 * A Client whose connect(), when it fails, closes its socket. pg-pool drops a client that failed to
 * connect without ending it; and where the client itself gave the handshake up (SCRAM asked for a
 * password DATABASE_URL does not give: `client password must be a string`), PostgreSQL kept the
 * socket open, waiting for the rest, until its authentication_timeout (a minute by default): a
 * command said why, then hung that long, and `serve` did not stop for a SIGTERM meanwhile (a review,
 * 2026-12-02). Given as a pool's `Client`, or made with `new`.
 */
export function closingClient(pgModule: typeof pg): typeof pg.Client {
  function ClosingClient(config?: string | pg.ClientConfig): pg.Client {
    const client = new pgModule.Client(config);
    const connect = client.connect.bind(client) as Connect;
    const close = () => (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    (client as unknown as { connect: Connect }).connect = (callback) => {
      if (callback)
        return connect((err) => {
          if (err) close();
          callback(err);
        });
      return (connect() as Promise<void>).catch((err: unknown) => {
        close();
        throw err;
      });
    };
    return client;
  }
  return ClosingClient as unknown as typeof pg.Client;
}
