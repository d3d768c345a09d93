import assert from 'node:assert/strict';
import { test } from 'node:test';
import { answeredType, answeredTypes, parseServiceType } from './service-type-names.js';

test('answers spell time-series by the installation name; the other types as they are', () => {
  assert.equal(answeredType('TIMESERIESDB', 'TIMESERIESDB'), 'TIMESERIESDB');
  assert.equal(answeredType('TIMESERIESDB', 'TIMESCALEDB'), 'TIMESCALEDB');
  assert.equal(answeredType('POSTGRES', 'TIMESCALEDB'), 'POSTGRES');
  assert.equal(answeredType('VECTOR', 'TIMESCALEDB'), 'VECTOR');
  assert.deepEqual(answeredTypes('TIMESCALEDB'), ['TIMESCALEDB', 'POSTGRES', 'VECTOR']);
  assert.deepEqual(answeredTypes('TIMESERIESDB'), ['TIMESERIESDB', 'POSTGRES', 'VECTOR']);
});

test('both names of time-series are read as the same type, in any case', () => {
  assert.equal(parseServiceType('TIMESERIESDB'), 'TIMESERIESDB');
  assert.equal(parseServiceType('TIMESCALEDB'), 'TIMESERIESDB');
  assert.equal(parseServiceType('timescaledb'), 'TIMESERIESDB');
  assert.equal(parseServiceType(' postgres '), 'POSTGRES');
  assert.equal(parseServiceType('VECTOR'), 'VECTOR');
  assert.equal(parseServiceType('MYSQL'), undefined);
  assert.equal(parseServiceType(''), undefined);
});
