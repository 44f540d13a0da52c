#!/usr/bin/env node
/**
 * The `tensorcomm` command. Node (22.1 and later) keeps the code it compiles
 * for this command's modules in its compile cache (`$TMPDIR/node-compile-cache`,
 * or NODE_COMPILE_CACHE; NODE_DISABLE_COMPILE_CACHE=1 turns it off), so a
 * later run loads them without compiling: enabled before they are imported.
 */
import nodeModule from 'node:module';

// Node 20 has no compile cache (nor the function): it runs the command as before.
nodeModule.enableCompileCache?.();
await import('./commands.ts');
