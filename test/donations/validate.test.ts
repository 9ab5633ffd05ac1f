import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import validatorIsEmail from 'validator/lib/isEmail.js';
import { compiledObject, DONATION_FIELDS, DONATION_KEYS, read } from '../../src/donations/fields.js';
import { isEmail, validateDonation, type ValidationResult } from '../../src/donations/validate.js';
import { exampleDonation } from '../support/app.js';

function errorsOf(result: ValidationResult): Record<string, string[]> {
  assert.equal(result.ok, false, 'expected the donation to be invalid');
  return result.ok ? {} : result.errors;
}

function donationOf(result: ValidationResult) {
  if (!result.ok) assert.fail(`expected a valid donation, got ${JSON.stringify(result.errors)}`);
  return result.donation;
}

const minimal = { donor_email: 'a@example.com', gift_aid: 'no', amount: '10', donation_type: 'one-time' };

describe('required fields', () => {
  test('an empty body names every required field, all at once', () => {
    assert.deepEqual(errorsOf(validateDonation({})), {
      donor_email: ['The donor email is required.'],
      gift_aid: ['The gift aid is required.'],
      amount: ['The amount is required.'],
      donation_type: ['The donation type is required.'],
    });
  });

  for (const empty of [null, '']) {
    test(`${JSON.stringify(empty)} counts as missing for a required field`, () => {
      const errors = errorsOf(validateDonation({ ...minimal, donor_email: empty, amount: empty }));
      assert.deepEqual(errors.donor_email, ['The donor email is required.']);
      assert.deepEqual(errors.amount, ['The amount is required.']);
    });
  }

  test('the four required fields alone make a valid donation with every optional field null or false', () => {
    const d = donationOf(validateDonation(minimal)) as Record<string, unknown>;
    assert.deepEqual(Object.keys(d), DONATION_KEYS);
    assert.deepEqual({ donor_email: d.donor_email, gift_aid: d.gift_aid, amount: d.amount, amount_minor: d.amount_minor, donation_type: d.donation_type }, {
      donor_email: 'a@example.com',
      gift_aid: false,
      amount: '10',
      amount_minor: 1000,
      donation_type: 'one-time',
    });
    for (const f of DONATION_FIELDS.filter((f) => !f.required)) assert.equal(d[f.name], f.kind === 'flag' ? false : null, f.name);
  });

  test('unknown fields are ignored', () => {
    const d = donationOf(validateDonation({ ...minimal, colour: 'blue', __admin: true }));
    assert.equal('colour' in d, false);
  });
});

describe('amount', () => {
  const amountOf = (amount: unknown) => validateDonation({ ...minimal, amount });

  for (const [given, minor] of [
    ['0.01', 1],
    ['1', 100],
    ['20.5', 2050],
    ['20.50', 2050],
    ['007.10', 710],
    ['999999999.99', 99999999999],
    ['0'.repeat(28) + '10.0', 1000], // 32 characters, the most
  ] as const) {
    test(`the string ${given} is echoed exactly and stored as ${minor} pence`, () => {
      const d = donationOf(amountOf(given));
      assert.equal(d.amount, given);
      assert.equal(d.amount_minor, minor);
    });
  }

  for (const [given, text, minor] of [
    [20.5, '20.5', 2050],
    [20.5, '20.5', 2050],
    [10, '10', 1000],
    [0.01, '0.01', 1],
    [0.1, '0.1', 10],
    [999999999.99, '999999999.99', 99999999999],
  ] as const) {
    test(`the JSON number ${given} comes back as "${text}", ${minor} pence`, () => {
      const d = donationOf(amountOf(given));
      assert.equal(d.amount, text);
      assert.equal(d.amount_minor, minor);
    });
  }

  const cases: Array<[unknown, string[]]> = [
    ['1e3', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['12,50', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['NaN', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['Infinity', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['abc', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    [' 10', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['10 ', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['+5', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['.5', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['5.', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['0x10', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['١٠', ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']], // Arabic-Indic digits are not plain decimal notation
    [true, ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    [['10'], ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    [{ value: 10 }, ['The amount must be a number in digits, such as 10, 10.50 or 0.50, without a currency sign, thousands separators or spaces.']],
    ['-5', ['The amount must be at least 0.01.']],
    [-5, ['The amount must be at least 0.01.']],
    ['0', ['The amount must be at least 0.01.']],
    ['0.00', ['The amount must be at least 0.01.']],
    [0, ['The amount must be at least 0.01.']],
    [1e-7, ['The amount must be at least 0.01.']],
    ['0.001', ['The amount must be at least 0.01.', 'The amount must not have more than 2 decimal places.']],
    ['10.505', ['The amount must not have more than 2 decimal places.']],
    [10.505, ['The amount must not have more than 2 decimal places.']],
    ['1000000000', ['The amount must not be greater than 999999999.99.']],
    ['999999999.999', ['The amount must not have more than 2 decimal places.', 'The amount must not be greater than 999999999.99.']],
    [1e21, ['The amount must not be greater than 999999999.99.']],
    ['1' + '0'.repeat(400), ['The amount must not be greater than 999999999.99.']],
    // JSON numbers too large for a double, which JSON.parse reads as Infinity: too large, not "not a number" (a review, 2026-12-02).
    [JSON.parse('1e309') as number, ['The amount must not be greater than 999999999.99.']],
    [JSON.parse('1' + '0'.repeat(400)) as number, ['The amount must not be greater than 999999999.99.']],
    [JSON.parse('-1e309') as number, ['The amount must be at least 0.01.']],
    // Leading zeros, in range, but stored and echoed as sent: at most 32 characters (a review stored 1 MB of them).
    ['0'.repeat(1_000_000) + '10.00', ['The amount must not be greater than 32 characters.']],
    ['0'.repeat(29) + '10.0', ['The amount must not be greater than 32 characters.']], // 33 characters; 32 are taken (above)
  ];
  for (const [given, messages] of cases) {
    test(`${JSON.stringify(given).slice(0, 40)} is rejected`, () => {
      assert.deepEqual(errorsOf(amountOf(given)).amount, messages);
    });
  }
});

describe('donation_date', () => {
  const dateOf = (donation_date: unknown) => validateDonation({ ...minimal, donation_date });

  test('DD-MM-YYYY becomes midnight UTC of that day', () => {
    assert.equal(donationOf(dateOf('25-02-2021')).donation_date, '2021-02-25T00:00:00.000000Z');
    assert.equal(donationOf(dateOf('29-02-2024')).donation_date, '2024-02-29T00:00:00.000000Z');
    assert.equal(donationOf(dateOf('31-12-1999')).donation_date, '1999-12-31T00:00:00.000000Z');
  });

  test('omitted or null means "when it is recorded" (null until stored)', () => {
    assert.equal(donationOf(dateOf(undefined)).donation_date, null);
    assert.equal(donationOf(dateOf(null)).donation_date, null);
  });

  for (const bad of ['2021-02-25', '25/02/2021', '5-2-2021', '25-02-21', '25-02-2021 ', '', 'today', '25-02-2021T00:00', 20210225]) {
    test(`${JSON.stringify(bad)} does not match the format`, () => {
      assert.deepEqual(errorsOf(dateOf(bad)).donation_date, ['The donation date does not match the format DD-MM-YYYY.']);
    });
  }

  for (const unreal of ['31-02-2021', '29-02-2023', '29-02-1900', '00-01-2021', '32-01-2021', '15-13-2021', '15-00-2021', '01-01-0000']) {
    test(`${unreal} is not a real date`, () => {
      assert.deepEqual(errorsOf(dateOf(unreal)).donation_date, ['The donation date is not a valid date.']);
    });
  }
});

describe('choices and flags', () => {
  for (const field of ['gift_aid', 'donation_type'] as const) {
    for (const bad of ['YES', 'Yes', ' yes', 'maybe', true, 1, ['yes'], 'one_time', 'One-Time']) {
      test(`${field} = ${JSON.stringify(bad)} is invalid`, () => {
        const label = field.replace('_', ' ');
        const taken = field === 'gift_aid' ? 'yes or no' : 'one-time, recurring or renewal';
        assert.deepEqual(errorsOf(validateDonation({ ...minimal, [field]: bad }))[field], [`The selected ${label} is invalid: it must be ${taken}, in lower case.`]);
      });
    }
  }

  test('gift_aid yes/no become true/false', () => {
    assert.equal(donationOf(validateDonation({ ...minimal, gift_aid: 'yes' })).gift_aid, true);
    assert.equal(donationOf(validateDonation({ ...minimal, gift_aid: 'no' })).gift_aid, false);
  });

  for (const type of ['one-time', 'recurring', 'renewal']) {
    test(`donation_type ${type} is accepted`, () => {
      assert.equal(donationOf(validateDonation({ ...minimal, donation_type: type })).donation_type, type);
    });
  }

  for (const [given, value] of [['yes', true], ['no', false], [true, true], [false, false], [null, false], [undefined, false], ['YES', true], ['true', true], ['1', true], [1, true], [0, false], ['on', true], ['False', false]] as const) {
    test(`zakat_donation ${JSON.stringify(given)} is ${value}`, () => {
      assert.equal(donationOf(validateDonation({ ...minimal, zakat_donation: given })).zakat_donation, value);
    });
  }

  for (const bad of ['off', '2', 2, '', 'y', ' yes', {}]) {
    test(`zakat_donation ${JSON.stringify(bad)} is invalid`, () => {
      assert.deepEqual(errorsOf(validateDonation({ ...minimal, zakat_donation: bad })).zakat_donation, ['The zakat donation must be yes or no (or true, false, 1, 0 or on).']);
    });
  }
});

describe('email and IP', () => {
  for (const bad of ['plainaddress', 'a@', '@b.com', 'a@b', 'a b@c.com', 'a@b..com', 7, ['a@b.com']]) {
    test(`donor_email ${JSON.stringify(bad)} is rejected`, () => {
      const errors = errorsOf(validateDonation({ ...minimal, donor_email: bad })).donor_email ?? [];
      assert.equal(errors.length, 1);
      assert.match(errors[0]!, /^The donor email must be (a valid email address|a string)\.$/);
    });
  }

  // Characters that show as nothing, which validator takes: the address looks like another, and a donor's
  // request naming it as it looks (donor export, donor erase) missed the donation.
  for (const invisible of ['ivy@example.org\u200b', 'sam\u00ad@example.org', 'a\u2060b@example.org', 'ivy@exam\ufeffple.org']) {
    test(`donor_email ${JSON.stringify(invisible)}, with a character that shows as nothing, is rejected`, () => {
      assert.equal(validatorIsEmail.default(invisible), true, 'validator alone takes it');
      assert.deepEqual(errorsOf(validateDonation({ ...minimal, donor_email: invisible })).donor_email, ['The donor email must be a valid email address.']);
    });
  }

  test('donor_email at most 254 characters', () => {
    const long = `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}.uk`; // 257 characters
    assert.deepEqual(errorsOf(validateDonation({ ...minimal, donor_email: long })).donor_email, [
      'The donor email must not be greater than 254 characters.',
    ]);
  });

  test("isEmail answers as validator's isEmail with its defaults, at and around each of its length limits", () => {
    // isEmail checks validator's limits itself (the whole address, the local part's and the domain's
    // UTF-8 bytes, each label of the domain) and has validator check the rest without them.
    const label = (n: number, c = 'b') => c.repeat(n);
    const locals = ['a', label(63, 'a'), label(64, 'a'), label(65, 'a'), `${label(62, 'a')}é`, `${label(63, 'a')}é`, 'é', '€'.repeat(21), '€'.repeat(22), '"a@b"', 'a.b+c', 'a..b', ''];
    const domains = [
      'example.org', `${label(63)}.org`, `${label(64)}.org`, `${label(63)}.${label(63)}.${label(63)}.${label(60)}.uk`, `${label(63)}.${label(63)}.${label(63)}.${label(61)}.uk`,
      `${label(62)}é.org`, `${label(63)}é.org`, 'exämple.org', 'b', 'b.', '', 'a@b.org', '[203.0.113.1]', '-b.org',
      // 254 and 255 UTF-8 bytes in 131 and 132 characters: the domain's limit is in bytes.
      `${label(63, 'é')}.${label(60, 'é')}.${label(3)}.uk`, `${label(63, 'é')}.${label(60, 'é')}.${label(4)}.uk`,
    ];
    const addresses = [...locals.flatMap((l) => domains.map((d) => `${l}@${d}`)), 'plainaddress', '@', 'a@', '@b.org', 'a b@c.org', `${label(64, 'a')}@${label(63)}.${label(63)}.${label(61)}.uk`];
    // Lengths across the whole address's limit of 254: a 64-character local part and a domain of 185 to 190 characters.
    for (let n = 185; n <= 190; n++) addresses.push(`${label(64, 'a')}@${label(63)}.${label(63)}.${label(n - 130)}.uk`);
    let valid = 0;
    for (const address of addresses) {
      assert.equal(isEmail(address), validatorIsEmail.default(address), address);
      if (isEmail(address)) valid++;
    }
    assert.ok(valid > 20 && valid < addresses.length - 20, `${valid} of ${addresses.length} valid: the cases must fall on both sides`);
  });

  for (const ip of ['203.0.113.7', '::1', '2001:db8::8a2e:370:7334', '127.0.0.1']) {
    test(`donor_ip ${ip} is accepted`, () => {
      assert.equal(donationOf(validateDonation({ ...minimal, donor_ip: ip })).donor_ip, ip);
    });
  }

  test('an empty donor_ip becomes null', () => {
    assert.equal(donationOf(validateDonation({ ...minimal, donor_ip: '' })).donor_ip, null);
  });

  for (const bad of ['256.1.1.1', 'localhost', '1.2.3', 'not an ip', 12345]) {
    test(`donor_ip ${JSON.stringify(bad)} is rejected`, () => {
      assert.equal(errorsOf(validateDonation({ ...minimal, donor_ip: bad })).donor_ip?.length, 1);
    });
  }
});

describe('free-text fields', () => {
  const textFields = ['donor_first_name', 'donor_last_name', 'donor_phone', 'donor_address', 'donor_city', 'donor_postcode', 'payment_method', 'payment_confirmation_number'];

  for (const field of textFields) {
    test(`${field}: null and omitted are null, "" stays "", text is kept exactly`, () => {
      assert.equal(donationOf(validateDonation({ ...minimal, [field]: null }))[field as 'donor_city'], null);
      assert.equal(donationOf(validateDonation(minimal))[field as 'donor_city'], null);
      assert.equal(donationOf(validateDonation({ ...minimal, [field]: '' }))[field as 'donor_city'], '');
      assert.equal(donationOf(validateDonation({ ...minimal, [field]: '  Ünïcödé 🙂  ' }))[field as 'donor_city'], '  Ünïcödé 🙂  ');
    });

    for (const bad of [5, true, {}, ['x']]) {
      test(`${field} = ${JSON.stringify(bad)} must be a string`, () => {
        const label = field.replaceAll('_', ' ');
        assert.deepEqual(errorsOf(validateDonation({ ...minimal, [field]: bad }))[field], [`The ${label} must be a string.`]);
      });
    }
  }

  test('255 characters is the limit, counted in characters rather than bytes', () => {
    assert.ok(validateDonation({ ...minimal, donor_city: 'é'.repeat(255) }).ok);
    assert.ok(validateDonation({ ...minimal, donor_city: '🙂'.repeat(255) }).ok);
    assert.deepEqual(errorsOf(validateDonation({ ...minimal, donor_city: 'x'.repeat(256) })).donor_city, [
      'The donor city must not be greater than 255 characters.',
    ]);
  });

  test('donor_address may hold 1,000 characters', () => {
    assert.ok(validateDonation({ ...minimal, donor_address: 'x'.repeat(1000) }).ok);
    assert.deepEqual(errorsOf(validateDonation({ ...minimal, donor_address: 'x'.repeat(1001) })).donor_address, [
      'The donor address must not be greater than 1000 characters.',
    ]);
  });

  test('a lone surrogate (from a JSON \\ud800 escape) is rejected: no database could store it as sent', () => {
    assert.deepEqual(errorsOf(validateDonation({ ...minimal, donor_first_name: 'a\ud800b' })).donor_first_name, [
      'The donor first name must be valid Unicode text.',
    ]);
    assert.deepEqual(errorsOf(validateDonation({ ...minimal, donor_email: 'a\ud800@example.com' })).donor_email, [
      'The donor email must be valid Unicode text.',
    ]);
  });

  test('a NUL character is rejected on the field that holds it', () => {
    assert.deepEqual(errorsOf(validateDonation({ ...minimal, donor_last_name: 'Do\u0000e' })).donor_last_name, [
      'The donor last name must not contain null characters.',
    ]);
  });
});

test('the interface example is valid and normalised as documented', () => {
  const d = donationOf(validateDonation(exampleDonation()));
  assert.equal(d.gift_aid, true);
  assert.equal(d.zakat_donation, true);
  assert.equal(d.amount, '25.00');
  assert.equal(d.amount_minor, 2500);
  assert.equal(d.donation_date, '2021-02-25T00:00:00.000000Z');
});

test('compiledObject makes each key an own property, in order, and refuses __proto__, which an object literal would take as the prototype', () => {
  const pick = compiledObject<[o: Record<string, unknown>], Record<string, unknown>>(['o'], [['b', read('o', 'b')], ['a', `${read('o', 'a')} ? 1 : 0`]]);
  assert.deepEqual(Object.entries(pick({ a: true, b: 'x', c: 'ignored' })), [['b', 'x'], ['a', 1]]);
  assert.throws(() => compiledObject([], [['__proto__', 'null']]), /__proto__/);
});
