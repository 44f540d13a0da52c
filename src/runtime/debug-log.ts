/**
 * Fallbacks the library takes on its own, said on stderr when NODE_DEBUG
 * names `tensorcomm` (Node's util.debuglog). They cost a job only start-up
 * time (modules loaded unbundled, code compiled again), too little to warn
 * about in every run, yet a slow start must have a way to say why.
 */
import { debuglog } from 'node:util';

export const debugLog = debuglog('tensorcomm');
