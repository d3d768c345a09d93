// POST /v1/analytics/identify and /v1/analytics/track: the vendor's CLI
// reports its own use there (its telemetry). Basin accepts both and keeps
// nothing (docs/decisions.md, "The vendor's analytics"): nothing an
// installation's users do is collected, and no request leaves the machine.

import { Type } from '@sinclair/typebox';

const Properties = Type.Record(Type.String(), Type.Unknown(), {
  description: 'any properties; Basin keeps none of them',
});

export const AnalyticsIdentifyInput = Type.Object(
  { properties: Type.Optional(Properties) },
  { $id: 'AnalyticsIdentifyInput' },
);

export const AnalyticsTrackInput = Type.Object(
  {
    event: Type.String({ minLength: 1, maxLength: 200, description: 'the event, by name' }),
    properties: Type.Optional(Properties),
  },
  { $id: 'AnalyticsTrackInput' },
);

export const AnalyticsResponse = Type.Object(
  { status: Type.Literal('success') },
  { $id: 'AnalyticsResponse' },
);
