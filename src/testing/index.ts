/** tensorcomm/testing: distributed unit tests inside one vitest file (docs/guides/testing.md). */
export {
  DEFAULT_RANK_TEST_COLLECTIVE_TIMEOUT_MS,
  DEFAULT_RANK_TEST_TIMEOUT_MS,
  type RankTest,
  type RankTestBody,
  type RankTestOptions,
  rankTest,
} from './rank-test.ts';
