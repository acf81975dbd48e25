/* memtap/tracer.h: the native tracer (libmemtap-preload.so) and what it writes into its process's
 * ring file (docs/tracer.md describes both; docs/ring.md the transport underneath).
 *
 * The shim interposes the malloc family and anonymous mmap/munmap/mremap, samples allocations as
 * a Poisson process over bytes (or records all of them), unwinds the sampled ones and appends one
 * fixed-layout record per event to its thread's ring. It does nothing else: merging threads,
 * assigning object ids, symbolising and writing the memtrace trace happen in a consumer
 * (src/record/, `memtap record`, or a background thread of the traced process).
 *
 * This header has two parts: the record schema, shared by the shim and every consumer of its
 * rings, and the control API of a process that traces itself. */
#ifndef MEMTAP_TRACER_H
#define MEMTAP_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------
 * Record schema (ring record types 16..63, registry kinds 16..)
 *
 * Every record carries the ring's timestamp, taken when it is written. Payload words are listed
 * in order. "frames" are return addresses, innermost first (index 0 is the caller of the
 * interposed function), the shim's own frames removed; their count is the record id. A stack
 * deeper than MT_TRACER_MAX_FRAMES keeps its innermost MT_TRACER_MAX_FRAMES frames and sets
 * MT_TRACER_FLAG_TRUNCATED.
 *
 * Ordering promises the consumer relies on (docs/tracer.md, "Order"): a FREE (or the old block of
 * a REALLOC) is written before the block is handed back to the allocator, an ALLOC after the
 * allocator returned it. So within one thread the records of one address alternate allocation,
 * free, allocation...; across threads only timestamps order them, and the consumer repairs what
 * clock skew and preemption between stamping and publishing get wrong.
 * ------------------------------------------------------------------------------------------- */

#define MT_TRACER_MAX_FRAMES 256u

typedef enum mt_tracer_record {
  /* [address, size in bytes, nsamples, kind | flags, frames...]. nsamples >= 1: sample points of
   * the Poisson process inside the block; with full tracing max(1, ceil(size / 8)). */
  MT_TRACER_REC_ALLOC = 16,
  /* [address]. In sampled mode only for blocks that were sampled; with full tracing for every
   * non-NULL pointer the program frees (the consumer ignores those it never saw allocated). */
  MT_TRACER_REC_FREE = 17,
  /* [old address, new address, new size in bytes, nsamples, kind | flags, frames...].
   * A realloc that moved or resized a block. old address 0: the old block was not sampled (or the
   * call was realloc(NULL, n)); nsamples 0: the new block was not sampled. realloc(p, 0) that
   * frees is written as a FREE; a failed realloc writes nothing. */
  MT_TRACER_REC_REALLOC = 18,
  /* [address, length in bytes, prot | (flags << 32), kind | flags, frames...]: an anonymous
   * mapping made by the program itself (not inside an allocator call); kind is MT_TRACER_KIND_MMAP
   * or MT_TRACER_KIND_MREMAP (the new range of a moved or grown mapping, after an UNMAP of the
   * old range). Regions are not sampled: nsamples is derived by the consumer. */
  MT_TRACER_REC_MAP = 19,
  /* [address, length in bytes]: munmap of a range (the consumer splits regions it cuts). */
  MT_TRACER_REC_UNMAP = 20,
  /* [module serial]: the module was unloaded (dlclose); its PCs mean nothing from here on. */
  MT_TRACER_REC_MODULE_UNLOAD = 21,
  /* [tid, stack low, stack high]: a thread started; its stack, if known, is [low, high). */
  MT_TRACER_REC_THREAD_START = 22,
  /* [tid]: a thread exited. */
  MT_TRACER_REC_THREAD_EXIT = 23,
  /* [pid]: the process is ending by _exit or _Exit (written only by the process the ring file is
   * for). The trace lasts until then, however long before it the last sampled allocation came. */
  MT_TRACER_REC_PROCESS_END = 24,
} mt_tracer_record;

/* The low 8 bits of the "kind | flags" word: which function made the block. */
typedef enum mt_tracer_kind {
  MT_TRACER_KIND_MALLOC = 1,
  MT_TRACER_KIND_CALLOC = 2,
  MT_TRACER_KIND_REALLOC = 3, /* also reallocarray */
  MT_TRACER_KIND_POSIX_MEMALIGN = 4,
  MT_TRACER_KIND_ALIGNED_ALLOC = 5,
  MT_TRACER_KIND_MEMALIGN = 6,
  MT_TRACER_KIND_VALLOC = 7,
  MT_TRACER_KIND_PVALLOC = 8,
  MT_TRACER_KIND_MMAP = 9,
  MT_TRACER_KIND_MREMAP = 10,
} mt_tracer_kind;

#define MT_TRACER_KIND_MASK 0xffu
#define MT_TRACER_FLAG_TRUNCATED (1u << 8) /* the stack was deeper than MT_TRACER_MAX_FRAMES */
#define MT_TRACER_FLAG_NO_STACK (1u << 9)  /* no unwind was possible (before start-up finished) */

/* Registry kinds (entries survive ring wrap-around). */
enum {
  /* id: module serial (1, 2, ... in load order; never reused within a process). bytes: a
   * mt_tracer_module header followed by build_id_length bytes of build-id and path_length bytes
   * of path (no NUL). Registered before any record whose frames point into the module. */
  MT_TRACER_REGISTRY_MODULE = 16,
  /* id 0. bytes: a mt_tracer_process header followed by exe_length bytes of the executable's
   * path, then the process's command line as /proc/self/cmdline gives it (its arguments, each
   * ended by a NUL; at most 4096 bytes, cut there; none if it could not be read): the rest of the
   * entry. Registered once, when tracing starts (and in a traced fork child), before the first
   * allocation record. */
  MT_TRACER_REGISTRY_PROCESS = 17,
};

typedef struct mt_tracer_module {
  uint64_t load_bias; /* runtime address = ELF virtual address + load_bias */
  uint64_t low, high; /* runtime address range of its PT_LOAD segments */
  uint32_t build_id_length;
  uint32_t path_length;
} mt_tracer_module;

typedef struct mt_tracer_process {
  double sample_rate; /* lambda, samples per 8-byte word; 1 with full tracing */
  uint32_t flags;     /* MT_TRACER_PROCESS_* */
  uint32_t exe_length;
  int64_t pid;
  int64_t parent_pid; /* for a traced child (--follow-fork), else 0 */
  int64_t start_realtime_ns;
  uint64_t image; /* a fingerprint of the image the shim started in, which changes at every exec
                     (its auxiliary vector, hashed); 0 when unknown */
} mt_tracer_process;

#define MT_TRACER_PROCESS_FULL 1u /* every allocation is recorded */

/* ---------------------------------------------------------------------------------------------
 * Control: a program linked with libmemtap (or run with libmemtap-preload.so) tracing itself
 *
 * The interposition itself is the shim's: these functions find libmemtap-preload.so in the
 * process and ask it to start or stop. It is there when the program runs with
 *   LD_PRELOAD=<libdir>/memtap/libmemtap-preload.so
 * or was linked with it (`-L<libdir>/memtap -Wl,-rpath,<libdir>/memtap -lmemtap-preload`, which
 * puts it before libc in symbol lookup). Otherwise mt_tracer_start fails with MT_E_STATE.
 *
 * A started process traces itself as under `MEMTAP=path`: a background thread of the process
 * (untraced, every signal blocked) reads the shim's rings, symbolises and writes the trace; the
 * trace is complete when mt_tracer_stop returns, or at exit if the program never stops it. A
 * later mt_tracer_start writes a new trace. Threads that already run join a session within 16 KiB
 * of their own allocations (docs/tracer.md). All three functions are thread-safe; none may be
 * called from a signal handler.
 * ------------------------------------------------------------------------------------------- */

/* How a process tracing itself samples. All zero: the default, one sample per 512 KiB on
 * average. The environment comes first: MEMTAP_FULL, MEMTAP_SAMPLE_INTERVAL, MEMTAP_RATE or
 * MEMTRACE_RATE, when set, decide the rate instead of these fields. */
typedef struct mt_tracer_options {
  double rate; /* memtrace's rate: samples per 8-byte word, 0 < rate <= 1; 0 means the default */
  bool full;   /* record every allocation (rate 1, exact sizes in words); `rate` is ignored */
} mt_tracer_options;

/* Starts tracing this process into the memtrace trace `path` (created, locked as memtrace locks
 * it, truncated). `opts` NULL means all defaults. Returns MT_OK, or fills `err`:
 *   MT_E_STATE    the shim is not in the process, or this process is traced already (MEMTAP=,
 *                 memtap record, an earlier mt_tracer_start not yet stopped);
 *   MT_E_INVALID  a rate out of range, a malformed MEMTAP_* variable, no path;
 *   MT_E_IO       the trace file cannot be created or locked. */
int mt_tracer_start(const char *path, const mt_tracer_options *opts, mt_error *err);

/* Stops tracing and writes the end of the trace; the program goes on untraced. MT_OK, or fills
 * `err`: MT_E_STATE when this process is not tracing itself (or is traced by memtap record,
 * which ends with the program), or what writing the trace's end met (MT_E_IO: disk full...). */
int mt_tracer_stop(mt_error *err);

/* Whether allocations of this process are being traced now (by any means). */
bool mt_tracer_running(void);

#ifdef __cplusplus
}
#endif
#endif
