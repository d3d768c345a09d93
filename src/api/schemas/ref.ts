import { type Static, type TSchema, Type } from '@sinclair/typebox';

/** A `$ref` to a registered ($id) schema that keeps the schema's static type. */
export function ref<T extends TSchema>(schema: T) {
  if (!schema.$id) throw new Error('ref() needs a schema with an $id');
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id));
}
