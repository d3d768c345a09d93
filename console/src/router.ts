// Pages by the URL's fragment (#/services/<id>): the server has one page
// to serve, `/`, and every address of the console works after a reload.
import { useEffect, useState } from 'react';

export type Route =
  | { page: 'services' }
  | { page: 'create' }
  | { page: 'service'; id: string }
  | { page: 'logs'; id: string }
  | { page: 'vpcs' }
  | { page: 'vpc'; id: string };

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'create') return { page: 'create' };
  if (parts[0] === 'vpcs') return parts[1] ? { page: 'vpc', id: parts[1] } : { page: 'vpcs' };
  if (parts[0] === 'services' && parts[1]) {
    return parts[2] === 'logs' ? { page: 'logs', id: parts[1] } : { page: 'service', id: parts[1] };
  }
  return { page: 'services' };
}

export function href(route: Route): string {
  switch (route.page) {
    case 'services':
      return '#/';
    case 'create':
      return '#/create';
    case 'service':
      return `#/services/${encodeURIComponent(route.id)}`;
    case 'logs':
      return `#/services/${encodeURIComponent(route.id)}/logs`;
    case 'vpcs':
      return '#/vpcs';
    case 'vpc':
      return `#/vpcs/${encodeURIComponent(route.id)}`;
  }
}

export function navigate(route: Route): void {
  location.hash = href(route);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}
