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
