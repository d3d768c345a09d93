// The shapes of a service's recorded nodes (service-nodes.ts holds what is
// done with them). A module of their own because the Service document
// (types.ts) holds them while service-nodes.ts reads the Service: neither
// has to import the other's module back.

export type NodeRole = 'primary' | 'standby';

export interface ServiceNode {
  /** Stable for the node's life: its directory and its name derive from it. */
  index: number;
  role: NodeRole;
  /** The node's own port; the service's port when it is the only node. */
  port: number;
  /** What the driver observed last (null until it did). */
  observed: NodeObservation | null;
}

/** What a driver sees of one node. */
export interface NodeObservation {
  /** Accepts connections. */
  ready: boolean;
  /** What the server says it is (pg_is_in_recovery); null when it does not answer. */
  actsAs: NodeRole | null;
  timeline: number | null;
  /** Its WAL position: written (a primary) or replayed (a standby). */
  lsn: string | null;
  /** How far behind the primary it replays, in bytes (standbys the primary sees). */
  lagBytes: number | null;
  /** RFC 3339. */
  at: string;
}
