// The pieces every `basin` command that drives the API shares: its kind and
// its --project and --output options, the path parameters of a service, and
// the checks of whole numbers and environments.

import type { ApiCommand, ApiContext, CliOption } from './command.js';
import { OUTPUT_OPTION, PROJECT_OPTION } from './service-format.js';

/** An API command with --project and --output, beside its own options. */
export function apiCommand(
  c: Omit<ApiCommand, 'kind' | 'options'> & { options?: Record<string, CliOption> },
): ApiCommand {
  return { ...c, kind: 'api', options: { ...PROJECT_OPTION, ...OUTPUT_OPTION, ...c.options } };
}

/** The path of a service of the project. */
export const servicePath = (c: ApiContext, id: string) => ({
  params: { path: { project_id: c.projectId, service_id: id } },
});

/** A usage problem when `value` (of `--name`) is given and is not a whole number. */
export const checkCount = (name: string, value: string | undefined): string | undefined =>
  value === undefined || /^\d+$/.test(value)
    ? undefined
    : `--${name} must be a whole number; got ${value}.`;

/** DEV or PROD, in any case; undefined for anything else. */
export function parseEnvironment(text: string): 'DEV' | 'PROD' | undefined {
  const e = text.toUpperCase();
  return e === 'DEV' || e === 'PROD' ? e : undefined;
}

/** A usage problem when an environment argument is given and is not DEV or PROD. */
export const checkEnvironment = (text: string | undefined): string | undefined =>
  text === undefined || parseEnvironment(text) !== undefined
    ? undefined
    : `The environment must be DEV or PROD; got ${text}.`;
