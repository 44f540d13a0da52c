import { TensorcommError } from '../runtime/errors.ts';

/**
 * A topology that cannot be used: an unknown preset, a file that cannot be read or parsed, a field
 * with a wrong type or value, an unknown key. `key` is the field's full path (`topology.gpusPerNode`,
 * `topology.interNode.nics`), `(file)` for a file that cannot be read or parsed, `topology.preset`
 * for an unknown preset.
 *
 * @see [Errors](../../docs/errors.md): every error's code, what it means and what to do
 */
export class TopologyError extends TensorcommError {
  override name = 'TopologyError';
  override readonly code: string = 'ERR_TC_TOPOLOGY';
  readonly key: string;

  /** `source` names where the topology came from (a file's path), put in front of the message. */
  constructor(key: string, problem: string, options?: ErrorOptions & { source?: string }) {
    super(`${options?.source ? `${options.source}: ` : ''}${key}: ${problem}`, options);
    this.key = key;
  }
}
