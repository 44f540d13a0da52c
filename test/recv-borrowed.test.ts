/** ThreadGroup.recvBorrowed and recvAnyBorrowed, as threads and as processes: a loan of the sender's value, not a copy. */
import { describe, expect, it } from 'vitest';
import { MEDIA } from './fixtures/media.ts';

const entry = new URL('./fixtures/recv-borrowed.ts', import.meta.url);

describe.each(MEDIA)('recvBorrowed (%s)', (medium, launch) => {
  it('lends the value without copying; the send completes at release; a wrong shape fails both ends', async () => {
    const [sender, receiver] = await launch<Record<string, unknown>>(entry, 2);
    expect(receiver.values).toEqual([7, 7]);
    expect(receiver.copiedIntoLike).toBe(false);
    expect(sender.doneWhileLent).toBe(false);
    expect(sender.sentAfterRelease).toBe(true);
    // Between threads the loan is the sender's own tensor; between processes, the store's copy of it.
    expect(sender.sawWrite).toBe(medium === 'threads' ? 99 : 7);
    expect(receiver.wrong).toMatch(/Mismatch/);
    expect(sender.wrong).toMatch(/Mismatch/);
    // recvAnyBorrowed: whatever dtype and size was sent, on the same loan terms.
    expect(receiver.any).toEqual({ dtype: 'int16', shape: [2 ** 18 + 3], last: 5 });
    expect(sender.anyDoneWhileLent).toBe(false);
    expect(sender.sawAnyWrite).toBe(medium === 'threads' ? 11 : 5);
    // sendViews/recvViews: several tensors as one loan between threads; refused between processes.
    if (medium !== 'threads') {
      const refused = /Views on group "world": its ranks cannot map each other's memory/;
      expect(sender.viewsRefused).toMatch(new RegExp(`^TypeError: send${refused.source}`));
      expect(receiver.viewsRefused).toMatch(new RegExp(`^TypeError: recv${refused.source}`));
      return;
    }
    expect(receiver.views).toEqual([
      { bytes: 4 * (1 << 18), first: 0 }, // float32 3 = 0x40400000: low byte 0
      { bytes: 8, first: 0 },
      { bytes: 16, first: 4 },
    ]);
    expect(receiver.next).toBe(6); // the plain send after the views message came after it
    expect(sender.viewsDoneWhileLent).toBe(false);
    expect(sender.sawViewsWrite).toBe(8);
    expect(sender.viewsAsTensor).toMatch(/Mismatch/);
    expect(receiver.viewsAsTensor).toMatch(/Mismatch/);
  });
});
