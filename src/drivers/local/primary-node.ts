// Which node of a spec is its primary: what converge/, replication/,
// endpoints/ and backups/ all ask, kept apart so that none of them imports
// another for it.

import type { ServiceSpec, SpecNode } from '../driver.js';

/** The recorded primary of a spec. */
export function primaryNode(spec: ServiceSpec): SpecNode {
  return (
    spec.nodes.find((n) => n.role === 'primary') ?? { index: 0, role: 'primary', port: spec.port }
  );
}
