/** Objects as the bytes object calls move: a structured clone (v8.serialize), never code (design decision 5). */
import { deserialize, serialize } from 'node:v8';
import { Tensor } from '../tensor/tensor.ts';

export function objectToTensor(obj: unknown, where: string): Tensor {
  let bytes: Buffer;
  try {
    bytes = serialize(obj);
  } catch (error) {
    throw new TypeError(`${where}: the object cannot be structured-cloned: ${(error as Error).message}`);
  }
  return Tensor.fromBuffer(bytes.buffer, bytes.byteOffset, [bytes.length], 'uint8');
}

export function tensorToObject(tensor: Tensor): unknown {
  return deserialize(Buffer.from(tensor.bytes()));
}
