import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { BasinError } from '../../src/client/index.js';
import { App } from './app.js';
import './styles.css';

const queries = new QueryClient({
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
