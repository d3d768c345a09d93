import { type FormEvent, useState } from 'react';
import { ErrorBox } from '../parts.js';
import { type Session, signIn } from '../session.js';

export function SignIn({
  onSignedIn,
  refused = null,
}: {
  onSignedIn: (s: Session) => void;
  /** Why the last session ended: Basin refused its key. */
  refused?: unknown;
}) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<unknown>(refused);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await signIn(key));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main id="main" className="page narrow">
      <h1>Basin console</h1>
      <p>Sign in with a project API key (a bearer key, bsn_…). It is kept in this tab only.</p>
      <form onSubmit={submit} className="form">
        <label htmlFor="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autoComplete="off"
          required
          value={key}
          onChange={(e) => setKey(e.target.value)}
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      <ErrorBox error={error} />
    </main>
  );
}
