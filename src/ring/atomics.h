/* Memory-ordering helpers of the ring (docs/ring.md §6). ThreadSanitizer does not model
 * stand-alone fences (GCC even refuses them with -Werror=tsan), so under TSan the acquire and
 * release fences become compiler barriers: on x86-64, the only target, that is exactly what
 * they compile to anyway (TSO orders loads with loads and stores with stores). */
#ifndef MEMTAP_SRC_RING_ATOMICS_H
#define MEMTAP_SRC_RING_ATOMICS_H

#include <stdatomic.h>

#if defined(__SANITIZE_THREAD__)
#define MT_RING_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MT_RING_TSAN 1
#endif
#endif

#ifdef MT_RING_TSAN
#define mt_fence_acquire() atomic_signal_fence(memory_order_seq_cst)
#define mt_fence_release() atomic_signal_fence(memory_order_seq_cst)
#else
#define mt_fence_acquire() atomic_thread_fence(memory_order_acquire)
#define mt_fence_release() atomic_thread_fence(memory_order_release)
#endif

#define mt_load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define mt_load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define mt_store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define mt_store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define mt_add_relaxed(p, v) atomic_fetch_add_explicit((p), (v), memory_order_relaxed)

/* A counter only one thread (and its signal handlers) writes, read by others: no locked add. */
#define mt_bump_single_writer(p, v) mt_store_relaxed((p), mt_load_relaxed(p) + (v))

#endif
