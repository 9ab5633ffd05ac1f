// POST /api/v1/donation/create: authenticate, validate, store durably, answer with the record.
import type { FastifyInstance, onRequestHookHandler } from 'fastify';
import { toDonationRecord } from '../../donations/donation.js';
import { validateDonation } from '../../donations/validate.js';
import type { Store } from '../../store/store.js';

interface Options {
  authenticate: onRequestHookHandler;
  store: Store;
}

export async function donationRoutes(app: FastifyInstance, { authenticate, store }: Options): Promise<void> {
  app.post('/donation/create', { onRequest: authenticate }, async (request, reply) => {
    // No body at all is an empty form; the parsers guarantee anything else is a plain object.
    const body = (request.body ?? {}) as Record<string, unknown>;
    const result = validateDonation(body);
    if (!result.ok) {
      return reply.code(422).send({ message: 'The given data was invalid.', errors: result.errors });
    }
    const stored = await store.recordDonation(request.charity.id, result.donation);
    return { data: toDonationRecord(stored) };
  });
}
