import { QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BasinError } from '../../src/client/index.js';
import { App, KEY_REFUSED } from './app.js';
import './styles.css';

const queries = new QueryClient({
  // A key revoked while the tab is open: back to the sign-in form, saying why.
  queryCache: new QueryCache({
    onError: (err) => {
      if (err instanceof BasinError && err.code === 'UNAUTHORIZED') {
        dispatchEvent(new CustomEvent(KEY_REFUSED, { detail: err }));
      }
    },
  }),
  defaultOptions: {
    queries: {
      // Rate limits and a Basin restarting pass; a 4xx is an answer.
      retry: (count, err) =>
        count < 3 &&
        err instanceof BasinError &&
        ['RATE_LIMITED', 'UNAVAILABLE', 'NETWORK_ERROR'].includes(err.code),
      refetchOnWindowFocus: false,
    },
  },
});

createRoot(document.getElementById('root') as HTMLElement).render(
  <StrictMode>
    <QueryClientProvider client={queries}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
