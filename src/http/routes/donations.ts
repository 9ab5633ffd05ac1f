// POST /api/v1/donation/create: authenticate, validate, store durably, answer with the record.
import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import { toDonationRecord, type DonationRecord } from '../../donations/donation.js';
import { CREATE_RESPONSE_SCHEMA, VALIDATION_ERROR_SCHEMA } from '../../donations/schema.js';
import { validateDonation } from '../../donations/validate.js';
import { ClaimLostError, type Store } from '../../store/store.js';
import { fingerprint, IDEMPOTENCY, idempotencyKeyOf, inFlight } from '../idempotency.js';

interface Options {
  authenticate: onRequestHookHandler;
  limitCreates: onRequestHookHandler;
  store: Store;
  /** Told of each donation newly recorded (not of replays). */
  recorded?: (record: DonationRecord) => void;
}

const INVALID = 'The given data was invalid.';

export async function donationRoutes(app: FastifyInstance, { authenticate, limitCreates, store, recorded = () => {} }: Options): Promise<void> {
  // The response schema compiles a fast serialiser for the record; errors are serialised plainly.
  const schema = { response: { 200: CREATE_RESPONSE_SCHEMA, 422: VALIDATION_ERROR_SCHEMA } };
  app.post('/donation/create', { onRequest: [authenticate, limitCreates], schema }, async (request, reply) => {
    const key = idempotencyKeyOf(request.headers);
    // No body at all is an empty form; the parsers guarantee anything else is a plain object.
    const result = validateDonation((request.body ?? {}) as Record<string, unknown>);
    if (!result.ok) return reply.code(422).send({ message: INVALID, errors: result.errors });
    const charityId = request.charity.id;

    if (key === undefined) {
      const record = toDonationRecord(await store.recordDonation(charityId, result.donation, { budget: request.database }));
      recorded(record);
      return { data: record };
    }

    // An invalid request never reaches this point, so it does not use up its key.
    const claim = await store.claimIdempotencyKey(charityId, key, fingerprint(result.donation), IDEMPOTENCY, request.database);
    switch (claim.outcome) {
      case 'replay':
        reply.header('Idempotent-Replayed', 'true');
        return { data: toDonationRecord(claim.donation) };
      case 'in_flight':
        throw inFlight();
      case 'mismatch':
        return reply.code(422).send({
          message: 'This Idempotency-Key was already used for a different donation.',
          errors: { idempotency_key: ['The Idempotency-Key was already used with a different request body. Use a new key for a new donation.'] },
        });
    }
    try {
      const record = toDonationRecord(await store.recordDonation(charityId, result.donation, { claim: { key, token: claim.token }, budget: request.database }));
      recorded(record);
      return { data: record };
    } catch (err) {
      if (err instanceof ClaimLostError) throw inFlight();
      // Free the key for a retry, without holding the answer: the request's time for the database may be up.
      store.releaseIdempotencyKey(charityId, key, claim.token).catch(() => {});
      throw err;
    }
  });
}
