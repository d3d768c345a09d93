import { Type } from '@sinclair/typebox';

export const Vpc = Type.Object(
  {
    id: Type.Optional(Type.String()),
    cidr: Type.Optional(Type.String()),
    name: Type.Optional(Type.String()),
    region_code: Type.Optional(Type.String()),
  },
  { $id: 'Vpc' },
);

export const VpcCreateInput = Type.Object(
  {
    cidr: Type.String({ description: 'private IPv4 block, /16 to /28, e.g. 10.0.0.0/16' }),
    name: Type.String({ description: '1 to 128 characters' }),
    region_code: Type.String(),
  },
  { $id: 'VpcCreateInput', additionalProperties: false },
);

export const VpcRenameInput = Type.Object(
  { name: Type.String({ description: 'the new name' }) },
  { $id: 'VpcRenameInput', additionalProperties: false },
);

export const Peering = Type.Object(
  {
    id: Type.Optional(Type.String()),
    error_message: Type.Optional(Type.String()),
    peer_account_id: Type.Optional(Type.String()),
    peer_region_code: Type.Optional(Type.String()),
    peer_vpc_id: Type.Optional(Type.String()),
    provisioned_id: Type.Optional(Type.String()),
    status: Type.Optional(Type.String({ description: 'pending, active or failed' })),
  },
  { $id: 'Peering' },
);

export const PeeringCreateInput = Type.Object(
  {
    peer_account_id: Type.String(),
    peer_region_code: Type.String(),
    peer_vpc_id: Type.String(),
  },
  { $id: 'PeeringCreateInput', additionalProperties: false },
);
