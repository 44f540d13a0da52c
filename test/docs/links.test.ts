/**
 * Links between the docs (README.md, docs/**): each relative target exists,
 * and an `#anchor` on a Markdown page is one of its headings, by GitHub's
 * rules, so a renamed heading or moved page breaks this test, not a reader's click.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchors, links, type Page, pages, root, slug } from './markdown.ts';

/** What is wrong with each relative link of `page`, as `page:line: target: why`. */
function brokenLinks(page: Page, read: (path: string) => string | undefined): string[] {
  return links(page.text).flatMap(({ target, line }) => {
    // Other sites (http:, mailto:) are not this repository's to check.
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return [];
    const [path, anchor] = target.split('#', 2);
    const file = path === '' ? join(root, page.path) : join(root, dirname(page.path), decodeURI(path));
    const text = read(file);
    const where = `${page.path}:${line}: ${target}`;
    if (text === undefined) return [`${where}: no such file`];
    if (anchor === undefined || !file.endsWith('.md')) return [];
    return anchors(text).has(decodeURIComponent(anchor)) ? [] : [`${where}: no heading has this anchor`];
  });
}

const readRepository = (path: string) =>
  existsSync(path) ? (path.endsWith('.md') ? readFileSync(path, 'utf8') : '') : undefined;

describe('links between the docs', () => {
  it('every relative link reaches its file, and its heading', () => {
    const all = pages();
    expect(all.map((p) => p.path)).toContain('docs/errors.md');
    expect(all.flatMap((page) => links(page.text)).length).toBeGreaterThan(50);
    expect(all.flatMap((page) => brokenLinks(page, readRepository))).toEqual([]);
  });

  it('anchors follow GitHub: punctuation and code marks dropped, spaces as dashes, repeats numbered', () => {
    expect(slug('Coming from torch.distributed')).toBe('coming-from-torchdistributed');
    expect(slug('`ERR_TC_SHM_NO_SPACE`: `ShmSpaceError`')).toBe('err_tc_shm_no_space-shmspaceerror');
    expect(slug("Mistakes a rank's end catches")).toBe('mistakes-a-ranks-end-catches');
    expect(slug('Two [nodes](x.md) — one machine')).toBe('two-nodes--one-machine');
    expect([...anchors('# A\n## A\n```\n# not a heading\n```\n## A\n')]).toEqual(['a', 'a-1', 'a-2']);
  });

  it('a missing page, a missing heading and a link to a heading of the page itself are told apart', () => {
    const page: Page = {
      path: 'docs/guides/x.md',
      text: [
        '# Here',
        'See [threads](threads.md#options), [gone](gone.md), [bad](threads.md#no-such-heading),',
        '[self](#here), [self wrong](#there), [web](https://example.com/#x), `[code](nowhere.md)`.',
      ].join('\n'),
    };
    const files: Record<string, string> = {
      [join(root, 'docs/guides/threads.md')]: '## Options\n',
      [join(root, 'docs/guides/x.md')]: page.text,
    };
    expect(brokenLinks(page, (path) => files[path])).toEqual([
      'docs/guides/x.md:2: gone.md: no such file',
      'docs/guides/x.md:2: threads.md#no-such-heading: no heading has this anchor',
      'docs/guides/x.md:3: #there: no heading has this anchor',
    ]);
  });
});
