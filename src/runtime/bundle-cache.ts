/**
 * Where rank bundles are built and cached (launch/rank-bundle.ts). A frame
 * that still points into it after source maps is this library's own code:
 * chunks holding any of the user's code keep their maps, so the user's
 * frames always come back as their own files (debug/call-site.ts).
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const BUNDLE_CACHE_DIR = join(tmpdir(), `tensorcomm-bundles-${process.getuid?.() ?? 'user'}`);
