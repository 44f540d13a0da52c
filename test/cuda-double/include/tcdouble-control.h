/*
 * The CUDA/NCCL test double's own control API, for tests: counts of what is
 * still alive (every count should be back to 0 once a test has released
 * everything), failure injection, and a full reset. tcdouble_live_comms and
 * tcdouble_live_red_ops are exported by the libnccl double, everything else
 * by the libcudart double.
 */
#ifndef TCDOUBLE_CONTROL_H
#define TCDOUBLE_CONTROL_H

#ifdef __cplusplus
extern "C" {
#endif

/** cudaMalloc'd and not freed. */
int tcdouble_live_allocations(void);
/** Created with cudaStreamCreateWithFlags and not destroyed. */
int tcdouble_live_streams(void);
/** Created or opened from an IPC handle, and not destroyed. */
int tcdouble_live_events(void);
/** Other processes' allocations mapped by cudaIpcOpenMemHandle and not closed. */
int tcdouble_open_ipc_mappings(void);
/** Loaded with cudaLibraryLoadData and not unloaded. */
int tcdouble_live_libraries(void);
/** Initialized (or initializing) and neither destroyed nor aborted. */
int tcdouble_live_comms(void);
/** Made by ncclRedOpCreatePreMulSum on a live communicator and not destroyed. */
int tcdouble_live_red_ops(void);

/** The next call of `function` (e.g. "cudaMalloc", "ncclAllReduce") in this process, by any thread, returns `code`. */
void tcdouble_fail_next(const char *function, int code);
/** Drops every allocation, mapping, stream, event, library and communicator, and every armed failure. */
void tcdouble_reset(void);

#ifdef __cplusplus
}
#endif

#endif  /* TCDOUBLE_CONTROL_H */
