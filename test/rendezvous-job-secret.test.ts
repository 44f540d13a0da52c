/**
 * A job that `tensorcomm run` / launchProcesses starts on one machine gets a
 * random rendezvous secret even on loopback, handed to its ranks in their
 * environment, so another local user can neither join its rendezvous nor
 * hold memory there.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { launchProcesses } from '../src/index.ts';
import { SECRET_ENV } from '../src/rendezvous/auth.ts';
import type { scenarios } from './fixtures/rendezvous-job-secret.ts';
import { scenarioFixture } from './fixtures/scenarios.ts';

const fixture = scenarioFixture<typeof scenarios>(
  new URL('./fixtures/rendezvous-job-secret.ts', import.meta.url),
);
const quiet = () => {};

let saved: string | undefined;
beforeEach(() => {
  saved = process.env[SECRET_ENV];
  delete process.env[SECRET_ENV];
});
afterEach(() => {
  if (saved === undefined) delete process.env[SECRET_ENV];
  else process.env[SECRET_ENV] = saved;
});

describe('the rendezvous secret of a launched job', () => {
  it('is random by default on loopback, reaches every rank, and keeps strangers out', async () => {
    const reports = await fixture.run('stranger', (entry, args) =>
      launchProcesses(entry, { nproc: 2, args, output: quiet, timeoutMs: 60_000 }),
    );
    expect(reports).toHaveLength(2);
    for (const r of reports) {
      expect(r.secretLength).toBe(64);
      expect(r.withoutSecret).toMatchObject({ ok: false, name: 'RendezvousAuthError' });
      expect(r.withoutSecret.ok || r.withoutSecret.message).toMatch(/the server requires a shared secret/);
      expect(r.wrongSecret).toMatchObject({ ok: false, name: 'RendezvousAuthError' });
      expect(r.wrongSecret.ok || r.wrongSecret.message).toMatch(/the client failed authentication/);
      expect(r.rawClosed).toBe(true);
      expect(r.rawFatal).toMatch(/^auth: the client sent no authentication/);
    }
  }, 90_000);
});
