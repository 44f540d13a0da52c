import { spawnThreads } from './src/index.ts';
for (const chaos of [undefined, { seed: 10, maxDelayMs: 5 }]) {
  const t0 = Date.now();
  try {
    await spawnThreads(new URL('./test/fixtures/running-ranks.ts', import.meta.url), { worldSize: 2, args: { scenario: 'unobserved' }, collectiveTimeoutMs: 5000, chaos });
    console.log('ok?');
  } catch (e) { console.log(Date.now() - t0, 'ms', (e as Error).message.slice(0, 3000)); }
}
