import assert from 'node:assert/strict';
import { test } from 'node:test';
import { authenticatedCharity, hashPassword, whichPassword } from '../../src/charities/credentials.js';

const at = (iso: string) => () => iso;
const charity = {
  password_hash: hashPassword('the-new-password'),
  old_password_hash: hashPassword('the-old-password'),
  old_password_until: '2026-11-30T12:00:00.000000Z',
  active: true,
};

test('whichPassword: the old password of a rotate --grace works until the instant its grace ends, and not at it', () => {
  assert.equal(whichPassword(charity, 'the-new-password', at('2026-12-25T00:00:00.000000Z')), 'current');
  assert.equal(whichPassword(charity, 'the-old-password', at('2026-11-30T11:59:59.999999Z')), 'old');
  assert.equal(whichPassword(charity, 'the-old-password', at('2026-11-30T12:00:00.000000Z')), undefined);
  assert.equal(whichPassword(charity, 'something-else', at('2026-11-29T00:00:00.000000Z')), undefined);
  assert.equal(whichPassword({ ...charity, old_password_hash: null, old_password_until: null }, 'the-old-password'), undefined);
  assert.equal(whichPassword(undefined, 'the-old-password'), undefined, 'an unknown username');
});

test('authenticatedCharity: an old password in its grace authenticates an active charity only', () => {
  const future = { ...charity, old_password_until: '9999-12-31T23:59:59.999999Z' };
  assert.equal(authenticatedCharity(future, 'the-old-password'), future);
  assert.equal(authenticatedCharity({ ...future, active: false }, 'the-old-password'), undefined);
  assert.equal(authenticatedCharity({ ...future, old_password_until: '2000-01-01T00:00:00.000000Z' }, 'the-old-password'), undefined);
});
