// A charity as the operator sees it; its password never leaves the store except as a hash.

export interface Charity {
  id: number;
  name: string;
  email: string;
  username: string;
  active: boolean;
  created_at: string;
}

/** What authentication needs to know about a username. */
export interface CharityCredential {
  id: number;
  name: string;
  email: string;
  password_hash: string;
  active: boolean;
  /** The password the last rotate replaced (its hash), and until when it is known as the charity's own. */
  previous_password_hash: string | null;
  previous_until: string | null;
}

export interface NewCharity {
  name: string;
  email: string;
  username: string;
  password_hash: string;
}

export class UsernameTakenError extends Error {
  constructor(username: string) {
    super(`The username ${username} is already taken.`);
  }
}
