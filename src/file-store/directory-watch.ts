/**
 * Wakes waiters when files of their key change in the job directory, through
 * one inotify watch (fs.watch) per store. Events are routed by channel (see
 * file-names.ts). A waiter also wakes after a bounded poll interval, so a
 * missed event (or a file system without inotify) costs latency, never a hang.
 * The watch itself does not keep the process alive; a waiter's timer does.
 */
import { type FSWatcher, watch } from 'node:fs';
import { ABORT_FILE, channelOfFile } from './file-names.ts';

type Wake = (byEvent: boolean) => void;

export class DirectoryWatch {
  readonly #waiters = new Map<string, Set<Wake>>();
  readonly #watcher: FSWatcher | undefined;
  readonly #onAbortFile: () => void;

  constructor(dir: string, onAbortFile: () => void) {
    this.#onAbortFile = onAbortFile;
    try {
      this.#watcher = watch(dir, { persistent: false }, (_event, name) => this.#event(name));
      // Losing the watch (e.g. the directory was removed) leaves the poll to notice changes.
      this.#watcher.on('error', () => this.#watcher?.close());
    } catch {
      this.#watcher = undefined;
    }
  }

  #event(name: string | Buffer | null): void {
    if (name === null) {
      this.wakeAll();
      return;
    }
    const file = name.toString();
    if (file === ABORT_FILE) {
      this.#onAbortFile();
      return;
    }
    const channel = channelOfFile(file);
    if (channel === undefined) return;
    for (const wake of this.#waiters.get(channel) ?? []) wake(true);
  }

  /** Resolves at the next event for `channel`, or after `ms`; true when an event woke it. */
  next(channel: string, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      let waiters = this.#waiters.get(channel);
      if (!waiters) this.#waiters.set(channel, (waiters = new Set()));
      const list = waiters;
      const wake: Wake = (byEvent) => {
        clearTimeout(timer);
        list.delete(wake);
        if (list.size === 0 && this.#waiters.get(channel) === list) this.#waiters.delete(channel);
        resolve(byEvent);
      };
      const timer = setTimeout(wake, ms, false);
      list.add(wake);
    });
  }

  wakeAll(): void {
    for (const waiters of [...this.#waiters.values()]) for (const wake of [...waiters]) wake(true);
  }

  close(): void {
    this.#watcher?.close();
    this.wakeAll();
  }
}
