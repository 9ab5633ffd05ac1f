// POST /api/v1/donation/create: authenticate, validate, store durably, answer with the record.
import type { FastifyInstance, onRequestHookHandler, preHandlerHookHandler } from 'fastify';
import { toDonationRecord, type DonationRecord } from '../../donations/donation.js';
import { CREATE_RESPONSE_SCHEMA, VALIDATION_ERROR_SCHEMA } from '../../donations/schema.js';
import { fieldsInQuery, validateDonation } from '../../donations/validate.js';
import { KeyTakenError, type Store } from '../../store/store.js';
import { formFieldName } from '../body.js';
import { inTurn } from '../connections.js';
import { fingerprint, formerFingerprints, IDEMPOTENCY, idempotencyKeyOf, inFlight } from '../idempotency.js';

interface Options {
  authenticate: onRequestHookHandler;
  limitCreates: onRequestHookHandler;
  /** Judges the credential again when the body took long to arrive (auth.ts, authenticatedStill). */
  stillAuthenticated: preHandlerHookHandler;
  store: Store;
  /** Told of each donation newly recorded (not of replays). */
  recorded?: (record: DonationRecord) => void;
}

const INVALID = 'The given data was invalid.';

export async function donationRoutes(app: FastifyInstance, { authenticate, limitCreates, stillAuthenticated, store, recorded = () => {} }: Options): Promise<void> {
  // The response schema compiles a fast serialiser for the record; errors are serialised plainly.
  const schema = { response: { 200: CREATE_RESPONSE_SCHEMA, 422: VALIDATION_ERROR_SCHEMA } };
  /** The charity and Idempotency-Key of each keyed create this process is recording. */
  const keysInFlight = new Set<string>();
  app.post('/donation/create', { onRequest: [authenticate, limitCreates], preHandler: stillAuthenticated, schema }, async (request, reply) => {
    const key = idempotencyKeyOf(request.raw);
    const inUrl = request.raw.url!.includes('?') ? fieldsInQuery(Object.keys(request.query as object).map(formFieldName)) : undefined;
    if (inUrl) return reply.code(422).send({ message: INVALID, errors: inUrl });
    // No body at all is an empty form; the parsers guarantee anything else is a plain object.
    const result = validateDonation((request.body ?? {}) as Record<string, unknown>);
    if (!result.ok) return reply.code(422).send({ message: INVALID, errors: result.errors });
    const charityId = request.charity.id;
    // Pipelined behind a request still being answered: stored only if this answer can still be sent.
    const turn = inTurn(request.raw);
    if (turn !== true && !(await turn)) {
      reply.hijack();
      request.raw.socket.destroy();
      return reply;
    }

    if (key === undefined) {
      const record = toDonationRecord(await store.recordDonation(charityId, result.donation, { budget: request.database }));
      recorded(record);
      return { data: record };
    }

    // One request per key at a time in this process; across instances, the database decides (store/donation-writes.ts).
    // An invalid request never reaches this point, so it does not use up its key.
    const slot = `${charityId}\n${key}`;
    if (keysInFlight.has(slot)) throw inFlight();
    keysInFlight.add(slot);
    try {
      const keyed = { key, fingerprint: fingerprint(result.donation), formerFingerprints: () => formerFingerprints(result.donation), ttlMicros: IDEMPOTENCY.ttlMicros };
      const outcome = await store.recordKeyedDonation(charityId, result.donation, keyed, request.database);
      switch (outcome.outcome) {
        case 'replay':
          reply.header('Idempotent-Replayed', 'true');
          return { data: toDonationRecord(outcome.donation) };
        case 'mismatch':
          return reply.code(422).send({
            message: 'This Idempotency-Key was already used for a different donation.',
            errors: { idempotency_key: ['The Idempotency-Key was already used with a different request body. Use a new key for a new donation.'] },
          });
      }
      const record = toDonationRecord(outcome.donation);
      recorded(record);
      return { data: record };
    } catch (err) {
      if (err instanceof KeyTakenError) throw inFlight(); // another instance's request with this key had not finished
      throw err;
    } finally {
      keysInFlight.delete(slot);
    }
  });
}
