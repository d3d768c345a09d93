// The two names of the time-series service type. The spec calls it
// TIMESERIESDB; the vendor's newer clients call it TIMESCALEDB and validate
// answers against that enum. Which one Basin writes is an installation
// setting (--service-type-name); what clients send may use either, and both
// mean the same type (docs/decisions.md, Service type names). Stored records
// always hold the spec's name: the setting changes only how answers read.

import type { ServiceType } from './types.js';

export const SERVICE_TYPE_NAMES = ['TIMESERIESDB', 'TIMESCALEDB'] as const;
export type ServiceTypeName = (typeof SERVICE_TYPE_NAMES)[number];

/** The spec's name: the default, and what the store holds. */
export const DEFAULT_SERVICE_TYPE_NAME: ServiceTypeName = 'TIMESERIESDB';

/** A service type as answers spell it under the installation's name for time-series. */
export type ServiceTypeAnswer = ServiceTypeName | Exclude<ServiceType, 'TIMESERIESDB'>;

/** How an answer spells `type`, given the installation's name for time-series. */
export const answeredType = (type: ServiceType, name: ServiceTypeName): ServiceTypeAnswer =>
  type === 'TIMESERIESDB' ? name : type;

/** The service types answers carry, in the spec's order. */
export const answeredTypes = (name: ServiceTypeName): readonly ServiceTypeAnswer[] => [
  name,
  'POSTGRES',
  'VECTOR',
];

/**
 * A type a client sent, under either name of time-series (and in any case:
 * the CLI's options are typed by people); undefined when it names none.
 */
export function parseServiceType(text: string): ServiceType | undefined {
  const upper = text.trim().toUpperCase();
  if ((SERVICE_TYPE_NAMES as readonly string[]).includes(upper)) return 'TIMESERIESDB';
  return upper === 'POSTGRES' || upper === 'VECTOR' ? upper : undefined;
}
