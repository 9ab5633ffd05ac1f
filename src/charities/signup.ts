// Signing a charity up: the service generates both its username and its password.
import { UsernameTakenError, type Charity, type NewCharity } from './charity.js';
import { generatePassword, generateUsername, hashPassword } from './credentials.js';

/** Where charities are kept; the Store is one. */
export interface CharityRegistry {
  createCharity(c: NewCharity): Promise<Charity>;
}

/** Creates the charity and returns it with its password, which exists nowhere else from now on. */
export async function signUpCharity(
  registry: CharityRegistry,
  { name, email }: { name: string; email: string },
): Promise<{ charity: Charity; password: string }> {
  const password = generatePassword();
  const password_hash = hashPassword(password);
  for (let attempt = 1; ; attempt++) {
    try {
      const charity = await registry.createCharity({ name, email, username: generateUsername(name), password_hash });
      return { charity, password };
    } catch (err) {
      // 36^6 suffixes make a clash rare; a few tries make it vanishingly so.
      if (!(err instanceof UsernameTakenError) || attempt >= 5) throw err;
    }
  }
}
