import { Type } from '@sinclair/typebox';
import { FNS } from '../../domain/series/catalogue.js';
import { ref } from './ref.js';

export const MetricLabelFilter = Type.Object(
  {
    key: Type.String({ minLength: 1, description: 'a label, e.g. `role` or `node`' }),
    value: Type.String({ minLength: 1, description: 'e.g. `primary`' }),
  },
  { $id: 'MetricLabelFilter' },
);

export const MetricsSeriesRequest = Type.Object(
  {
    name: Type.String({ description: 'a name from GET …/metrics/available-series' }),
    from: Type.String({ format: 'date-time', description: 'start of the window (RFC 3339)' }),
    to: Type.String({ format: 'date-time', description: 'end of the window (RFC 3339)' }),
    bucket_seconds: Type.Optional(
      Type.Integer({
        minimum: 60,
        description:
          'bucket size; at least 300 for a window starting more than a day ago; by default 60 up to an hour, 3600 up to 30 days, 86400 beyond',
      }),
    ),
    fn: Type.Optional(
      Type.Union(
        FNS.map((f) => Type.Literal(f)),
        { description: 'how a bucket is reduced to one value (LAST by default)' },
      ),
    ),
    filters: Type.Optional(Type.Array(ref(MetricLabelFilter))),
  },
  { $id: 'MetricsSeriesRequest', additionalProperties: false },
);

export const MetricDataPoint = Type.Object(
  {
    time: Type.String({ format: 'date-time', description: "the bucket's start" }),
    value: Type.Union([Type.Number(), Type.Null()], { description: 'null for an empty bucket' }),
  },
  { $id: 'MetricDataPoint' },
);

export const MetricSeries = Type.Object(
  {
    labels: Type.Record(Type.String(), Type.String()),
    data: Type.Array(ref(MetricDataPoint)),
  },
  { $id: 'MetricSeries' },
);

export const MetricSeriesList = Type.Array(ref(MetricSeries));
export const AvailableSeries = Type.Array(Type.String());
