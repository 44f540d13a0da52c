/**
 * Gives the tensor layer libc's memcpy for large blocks in shared memory
 * (tensor/shared-copy.ts), where libc can be called (Linux with glibc).
 * Imported for this effect by the setup every rank and program loads.
 */
import { registerSharedCopy } from '../tensor/shared-copy.ts';
import { hasLibc, libc } from './libc.ts';

/** Registers libc's memcpy (again, after a test registered another copy). */
export function registerLibcCopy(): void {
  registerSharedCopy(() => (hasLibc() ? libc().memcpy : undefined));
}

registerLibcCopy();
