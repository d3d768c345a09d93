// The shell: sign in first, then the project's pages under a header.
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { fetchInstallation } from './installation.js';
import { CreateService } from './pages/create-service.js';
import { Logs } from './pages/logs.js';
import { ServicePage } from './pages/service.js';
import { Services } from './pages/services.js';
import { SignIn } from './pages/sign-in.js';
import { VpcPage, Vpcs } from './pages/vpcs.js';
import { href, useRoute } from './router.js';
import { forgetKey, type Session, signIn, storedKey } from './session.js';

/** The event a query sends when Basin refuses the key it signed in with. */
export const KEY_REFUSED = 'basin:key-refused';

export function App() {
  const [session, setSession] = useState<Session | null>(null);
  const [refused, setRefused] = useState<unknown>(null);
  // A reload keeps the tab signed in: the key is in its sessionStorage.
  const [resuming, setResuming] = useState(() => storedKey() !== null);
  const queries = useQueryClient();
  useEffect(() => {
    const key = storedKey();
    if (!key) return;
    signIn(key)
      .then(setSession, () => forgetKey())
      .finally(() => setResuming(false));
  }, []);

  const signOut = () => {
    forgetKey();
    queries.clear();
    setSession(null);
  };
  useEffect(() => {
    const onRefused = (e: Event) => {
      signOut();
      setRefused((e as CustomEvent).detail);
    };
    addEventListener(KEY_REFUSED, onRefused);
    return () => removeEventListener(KEY_REFUSED, onRefused);
  });

  if (resuming) return <main className="page" aria-busy="true" />;
  if (!session) {
    return (
      <SignIn
        refused={refused}
        onSignedIn={(s) => {
          setRefused(null);
          setSession(s);
        }}
      />
    );
  }
  return <Signed session={session} onSignOut={signOut} />;
}

function Signed({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const route = useRoute();
  const installation = useQuery({ queryKey: ['installation'], queryFn: fetchInstallation });
  useEffect(() => {
    document.getElementById('main')?.focus();
  }, [route.page]);
  return (
    <>
      <header className="top">
        <a className="brand" href={href({ page: 'services' })}>
          Basin
        </a>
        <nav aria-label="Main">
          <a href={href({ page: 'services' })}>Services</a>
          <a href={href({ page: 'vpcs' })}>VPCs</a>
        </nav>
        <span className="who">
          Project {session.projectName} <span className="mono">({session.projectId})</span>
        </span>
        <button type="button" className="secondary" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <main id="main" className="page" tabIndex={-1}>
        {route.page === 'services' && <Services session={session} />}
        {route.page === 'create' && (
          <CreateService session={session} installation={installation.data} />
        )}
        {route.page === 'service' && (
          <ServicePage session={session} id={route.id} installation={installation.data} />
        )}
        {route.page === 'logs' && <Logs session={session} id={route.id} />}
        {route.page === 'vpcs' && <Vpcs session={session} installation={installation.data} />}
        {route.page === 'vpc' && <VpcPage session={session} id={route.id} />}
      </main>
    </>
  );
}
