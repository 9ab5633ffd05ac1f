// A charity as the operator sees it; its password never leaves the store except as a hash.

export interface Charity {
  id: number;
  name: string;
  email: string;
  username: string;
  active: boolean;
  created_at: string;
  /** Until when the password a `rotate --grace` replaced still works (stored format), or null. */
  old_password_until: string | null;
}

/** What authentication needs to know about a username. */
export interface CharityCredential {
  id: number;
  name: string;
  email: string;
  password_hash: string;
  active: boolean;
  /** The password a `rotate --grace` replaced, and until when it works; both null when none does. */
  old_password_hash: string | null;
  old_password_until: string | null;
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
