// Every group of the `basin` command, in the order help lists them: the
// administration of the data directory, then the commands that drive a
// Basin over HTTP.

import type { CliGroup } from './command.js';
import { credentialGroup } from './credential-group.js';
import { hostGroup } from './host-group.js';
import { mcpGroup } from '../mcp/mcp-group.js';
import { loginGroup } from './login-group.js';
import { projectGroup } from './project-group.js';
import { replicaSetGroup } from './replica-set-group.js';
import { serviceGroup } from './service-group.js';
import { storeGroup } from './store-group.js';
import { userGroup } from './user-group.js';
import { vpcGroup } from './vpc-group.js';

export const GROUPS: readonly CliGroup[] = [
  projectGroup,
  userGroup,
  credentialGroup,
  storeGroup,
  hostGroup,
  loginGroup,
  serviceGroup,
  replicaSetGroup,
  vpcGroup,
  mcpGroup,
];
