/** The bench scripts' tables: the same nccl-tests layout as `npx tensorcomm bench`, from one place. */
export { type Column, fixed, formatTable } from '../src/cli/bench/table.ts';
