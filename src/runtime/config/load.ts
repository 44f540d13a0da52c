/**
 * loadClusterConfig: a cluster config file (YAML or JSON; YAML parses both) or
 * an object in the seed's snake_case schema, validated exactly and returned
 * in camelCase with defaults filled. checkClusterConfig validates a camelCase
 * ClusterConfig handed to a launcher, so a job validates its config once where
 * it starts.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { ClusterConfig } from './cluster-config.ts';
import { ClusterConfigError, parseClusterConfig } from './validate.ts';

/**
 * yaml on first use, not on import: every rank thread loads this module (checkClusterConfig), and
 * yaml's hundred-odd milliseconds of loading per thread were most of a rank's start-up.
 */
function parseYaml(text: string): unknown {
  return (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse(text);
}

export function loadClusterConfig(pathOrObject: string | URL | object): ClusterConfig {
  let document: unknown = pathOrObject;
  if (typeof pathOrObject === 'string' || pathOrObject instanceof URL) {
    let text: string;
    try {
      text = readFileSync(pathOrObject, 'utf8');
    } catch (error) {
      throw new ClusterConfigError('(root)', 'cannot be read', {
        message: `loadClusterConfig: cannot read ${String(pathOrObject)}: ${(error as Error).message}`,
        cause: error,
      });
    }
    try {
      document = parseYaml(text);
    } catch (error) {
      throw new ClusterConfigError('(root)', 'is not YAML or JSON', {
        message: `loadClusterConfig: ${String(pathOrObject)} is not YAML or JSON: ${(error as Error).message}`,
        cause: error,
      });
    }
  }
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new ClusterConfigError('(root)', 'must be a mapping with a "cluster" key');
  }
  for (const key of Object.keys(document)) {
    if (key !== 'cluster') throw new ClusterConfigError(key, 'is not a known key (expected: cluster)');
  }
  return parseClusterConfig((document as { cluster?: unknown }).cluster ?? {}, 'cluster', 'snake');
}

/** A ClusterConfig written in code (camelCase), validated with defaults filled. */
export function checkClusterConfig(config: unknown): ClusterConfig {
  return parseClusterConfig(config, 'config', 'camel');
}
