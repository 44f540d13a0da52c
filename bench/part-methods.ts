/**
 * How each part of `npm run bench -- --markdown` measures, printed above its
 * tables on the benchmarks page (the page refuses a part missing here).
 */
import type { PartMethods } from './benchmarks-page.ts';

export const PART_METHODS: PartMethods = {
  kernels:
    'Reduction kernels (the in-place two-input reduce of allReduce) per dtype and size, beside `TypedArray.set` of the same bytes in the same run. Warm: each figure after warm-up iterations.',
  collectives:
    "Collectives between rank threads of one process, in the nccl-tests layout (algbw = bytes / time; busbw = algbw × the collective's factor), then the zero-copy `destGet` beside a plain copy. Warm: each size after a throwaway first row, the fastest of three probes.",
  'collectives in processes':
    'The same bench with 2 rank processes on one machine (`FileTensorStore`: shared-memory rings and arenas), allReduce and send/recv. Warm, as above.',
  'small calls beside Open MPI':
    "The 4 B allReduce and 4 B send/recv round trip between 2 thread ranks, in rounds alternating with Open MPI's (2 processes, shared memory): each round's ratio compares figures taken seconds apart, and the verdict is on the median of the rounds' ratios. Warm: each round's calls follow a warm-up.",
  'cold vs warm calls beside Open MPI':
    "What a short job meets: 2 thread ranks' 4 B round trip and allReduce, and 1 KiB allReduce at 4, 8 and 64 thread ranks, each job in a fresh process timed from its first call, the mean per call over calls 1-1,000 and 1,001-10,000 (cold) and 15,001-25,000 (warm); Open MPI makes the same calls from its own start, its clock read at the same counts. Medians of 3 jobs; each ratio is the median of a job's figure over the Open MPI job run right after it. The no-TurboFan column is the same jobs run with V8's optimizing compiler off (`node --no-opt`): a reference, not a setting. Where it is far below the tensorcomm column, the span's time is V8 compiling the call path in each rank thread, not the calls themselves; the warm span shows what that compiling buys. The node-floor column, for the 2-rank round trip, is Node's own floor measured the same way: 2 new worker threads round-tripping over a SharedArrayBuffer, each send and receive an awaited async function (bench/floors/sab_cold_calls.mjs).",
  'process and node ranks: cold vs warm calls beside gloo and Open MPI':
    '2 rank processes of one machine (4 B round trip and allReduce), and 2 "nodes" on loopback (4 B allReduce), timed from a fresh job\'s first call over the same spans as above; gloo and Open MPI make the same calls from their own start in the same run. Medians of the jobs, ratios of paired jobs.',
  oversubscribed:
    "1 KiB allReduce with more thread ranks than cores (4, 8, 64), beside Open MPI's with as many processes (`mpirun --oversubscribe`), run in a process of its own. Each figure is the median of repeats after a warm-up; the warm-up's own mean is printed beside it.",
  anchors:
    'What a user would use instead, measured on this machine in this run: Node primitives (SharedArrayBuffer ping-pong, postMessage, copy), gloo (torch.distributed, 2 processes over loopback) and Open MPI (2 processes, shared memory), from ../shared/anchors.',
  compression:
    'A 64 MiB bfloat16 tensor (90% zeros, and random) between two thread workers over an emulated 1 Gbit/s link, raw beside lz4 and zstd; then each codec alone on the same bytes.',
  'debug checks':
    'What the default-on debugging checks cost a 1 KiB allReduce and broadcast: batches with the checks on alternating with batches that skip them, inside one job, and jobs with checks on and off alternating.',
  'start-up':
    'spawnThreads → one barrier → resolved, for .mjs and .ts entries, each in a fresh process (first job of a process, and a later cold job), and a job on warm pooled threads; beside N bare `new Worker` threads that import nothing (the floor), interleaved, medians of the repeats.',
  'p2p messages':
    'Typed messages between two named thread workers: messages/s for small dict messages and GB/s for a 64 MiB tensor list, beside the ThreadGroup send/recv they are built on, same run.',
  'file store':
    "`FileTensorStore` between two processes without the collective layers: a 4 B value's round trip (through the file handshake and the rings) with the CPU time both spent, and a 64 MiB value received into the consumer's tensor (arena, file per value, rings), beside gloo's p2p figures; medians of blocks and of single transfers.",
  'weight sync':
    'WeightSyncEngine from 2 trainer ranks to 2 rollout ranks, as threads and as processes, with 1 and 2 senders, beside a per-tensor broadcast and a copy floor (each rollout copying a model of its own), medians of the syncs.',
  'across nodes':
    'Two "nodes" over loopback TCP (processes with distinct node ids), 2 × 1 and 2 × 2 ranks, beside gloo and Open MPI over TCP with as many processes; rounds of the three interleaved, medians of the rounds.',
  'weight sync across nodes':
    'A trainer alone on node 0 syncs the model to 1, 2 and 3 rollouts on node 1 over loopback TCP, each rollout loading it into its own model (`receive({ into })`, and beside it `borrow` + `copy_`), beside a plain TCP copy of the same bytes between the nodes; modes interleaved round by round, medians of the rounds. Beside each time, the CPU time the four processes spent on the sync, and that spread over the cores: the least wall time that work can take on this machine.',
  'prediction against measured runs':
    'The alpha-beta model calibrated on this machine from two sizes (2 processes, and 2 "nodes" over loopback), then other sizes and collectives timed and printed beside their prediction: median and p95 of the error from 1 MiB.',
  'predict mode cost':
    'The same job of mixed calls with and without `predict`, as threads and as processes, jobs alternating; cold is the whole job as a user waits for it, warm the same calls run again inside the job; medians of the jobs.',
  'Node versions':
    "The start-up and 4 B rows on each supported Node (official binaries pinned by tools/node), each in a process of that Node beside its floor and Open MPI; then the steadiness of a fresh job's 4 B round trips (blocks of 2,000; after the first 10,000, no block above 2× the median, and the median within 1.5× of the machine's Node), jobs alternating between versions.",
  'tensorcomm beside the anchors':
    "tensorcomm's collectives (threads, then processes) beside gloo and Open MPI at the sizes the anchors measure, and the goals as ratios of figures from this run.",
};
