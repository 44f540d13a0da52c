/**
 * Where the members of one group, tasks of this thread, meet: the group's
 * collectives by call number and its point-to-point messages. A thread that
 * runs ranks as tasks runs one job, whose group ids are unique within it, so
 * a hub is found by the group's id alone; it is forgotten once every member
 * destroyed its backend.
 */
import { Meeting } from './meeting.ts';
import { TaskMailboxes } from './task-p2p.ts';

export class GroupHub {
  readonly size: number;
  readonly mailboxes = new TaskMailboxes();
  readonly #meetings = new Map<number, Meeting>();
  /** Members whose backend is still open. */
  open = 0;

  constructor(size: number) {
    this.size = size;
  }

  /** Collective call `seq`, as the first member to come made it. */
  meeting(seq: number): Meeting {
    let meeting = this.#meetings.get(seq);
    if (!meeting) {
      meeting = new Meeting(this.size, () => this.#meetings.delete(seq));
      this.#meetings.set(seq, meeting);
    }
    return meeting;
  }
}

const hubs = new Map<string, GroupHub>();

/** The hub of group `id` of `size` members, for one more member's backend. */
export function joinHub(id: string, size: number): GroupHub {
  let hub = hubs.get(id);
  if (!hub) hubs.set(id, (hub = new GroupHub(size)));
  hub.open++;
  return hub;
}

/** A member's backend is destroyed: the hub goes with the last. */
export function leaveHub(id: string, hub: GroupHub): void {
  if (--hub.open === 0 && hubs.get(id) === hub) hubs.delete(id);
}
