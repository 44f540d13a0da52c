/**
 * Wakes waiters when files of their key change, through inotify watches
 * (fs.watch) on the job directory and the store's done directory. Events are
 * routed by channel (see file-names.ts). A waiter also wakes after a bounded poll interval, so a
 * missed event (or a file system without inotify) costs latency, never a hang.
 * The watch itself does not keep the process alive; a waiter's timer does.
 */
import { type FSWatcher, watch } from 'node:fs';
import { ABORT_FILE, channelOfFile } from './file-names.ts';

type Wake = (byEvent: boolean) => void;

export class DirectoryWatch {
  readonly #waiters = new Map<string, Set<Wake>>();
  readonly #watchers: FSWatcher[] = [];
  readonly #onAbortFile: () => void;

  constructor(dirs: readonly string[], onAbortFile: () => void) {
    this.#onAbortFile = onAbortFile;
    for (const dir of dirs) {
      try {
        const watcher = watch(dir, { persistent: false }, (_event, name) => this.#event(name));
        // Losing the watch (e.g. the directory was removed) leaves the poll to notice changes.
        watcher.on('error', () => watcher.close());
        this.#watchers.push(watcher);
      } catch {
        // Without a watch the bounded poll still notices every change.
      }
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
    for (const watcher of this.#watchers) watcher.close();
    this.wakeAll();
  }
}
