/* The ring file's layout (docs/ring.md §2): the file header, the per-ring blocks, the record and
 * registry header words, and the geometry a validated file is read through. Producer and
 * consumer both see the file only through these definitions; layout.c plans a new file and
 * validates a mapped one (the part a hostile file reaches first). */
#ifndef MEMTAP_SRC_RING_LAYOUT_H
#define MEMTAP_SRC_RING_LAYOUT_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "memtap/ring.h"

#define MT_RING_MAGIC 0x31474e4952544d4dull /* "MMTRING1" read as little-endian bytes */
#define MT_RING_VERSION 1u
#define MT_RING_FILE_SUFFIX ".memtap-ring"
/* Between the pid and the namespace in the name of a file of another pid namespace (create.c). */
#define MT_RING_FILE_PIDNS "-pidns"

/* Cache-line pairs: x86's adjacent-line prefetcher pulls lines in 128-byte pairs, so fields
 * written by different parties are kept 128 bytes apart. */
#define MT_RING_LINE 128

#define MT_RING_MIN_WORDS (MT_RING_MIN_SIZE / 8u)
#define MT_RING_MAX_WORDS (1ull << 27) /* 1 GiB per ring */
#define MT_RING_MAX_RINGS 65536u
/* Rings per file unless MEMTAP_RING_THREADS or the options say otherwise. */
#define MT_RING_DEFAULT_RINGS 4096u
#define MT_RING_HISTORY 32u /* generation starts remembered per ring */

/* File states (mt_ring_file_header.state). */
enum { MT_RING_STATE_RUNNING = 1, MT_RING_STATE_STOPPED = 2 };
/* Ring ownership (mt_ring_block.owner_state). */
enum { MT_RING_FREE = 0, MT_RING_CLAIMED = 1 };
/* Primary consumer states (mt_ring_file_header.primary, bits 63..32). CLAIMING: a consumer won
 * the compare-and-swap and is publishing its positions and start time; a lossless producer waits
 * (checking only that the claimer's process exists) and reads neither until ATTACHED. */
enum {
  MT_RING_PRIMARY_NONE = 0,
  MT_RING_PRIMARY_ATTACHED = 1,
  MT_RING_PRIMARY_DETACHED = 2,
  MT_RING_PRIMARY_CLAIMING = 3,
};

/* The file header, at offset 0. Bytes 0..255 are written once, before `magic`; the rest is
 * shared state, each part on its own line pair. */
typedef struct mt_ring_file_header {
  _Atomic uint64_t magic; /* MT_RING_MAGIC, stored last (release) at creation */
  uint32_t version;       /* MT_RING_VERSION */
  uint32_t header_size;   /* bytes reserved for this header */
  uint64_t file_size;     /* bytes */
  uint32_t ring_count;
  uint32_t ring_block_size; /* sizeof(mt_ring_block) */
  uint64_t ring_words;      /* words per ring: a power of two */
  uint64_t blocks_offset;   /* the ring blocks: ring_count * ring_block_size bytes */
  uint64_t registry_offset; /* the registry: registry_words words */
  uint64_t registry_words;
  uint64_t data_offset;      /* ring i's words start at data_offset + i * ring_words * 8 */
  uint32_t max_record_words; /* MT_RING_MAX_RECORD_WORDS */
  uint32_t mode;             /* mt_ring_mode */
  uint32_t clock;            /* mt_ring_clock, never AUTO */
  uint32_t reserved0;
  uint64_t clock_hz;          /* timestamp ticks per second */
  uint64_t clock_base;        /* raw clock when created ... */
  uint64_t monotonic_base_ns; /* ... read together with CLOCK_MONOTONIC ... */
  uint64_t realtime_base_ns;  /* ... and CLOCK_REALTIME */
  int32_t pid;                /* the producer */
  int32_t parent_pid;         /* 0 unless created in a forked child */
  uint64_t start_time;        /* the producer's start time (/proc/PID/stat, ticks since boot) */
  uint64_t fork_number;       /* which fork of the parent made this file (0: none) */
  uint8_t reserved1[256 - 144];

  /* 256: producer state, written rarely. */
  _Atomic uint32_t state; /* MT_RING_STATE_* */
  _Atomic uint32_t paused;
  _Atomic uint32_t degraded; /* lossless file fell back to flight recorder */
  _Atomic uint32_t rings_in_use;
  _Atomic uint64_t forks; /* forks made by this process */
  /* One past the highest ring index ever claimed: consumers poll rings below it only (a file
   * planned for thousands of threads costs a consumer what the program's threads use). Only
   * grows; a consumer clamps it to ring_count. */
  _Atomic uint32_t rings_high;
  uint32_t reserved_signals;
  /* Deliveries of signal i (1..15) to the traced program's handlers, counted by the tracer's
   * signal trampoline: memtap record passes on a signal sent to it alone, not one that reached
   * the program too (sent to the process group). */
  _Atomic uint32_t signals_handled[MT_RING_SIGNALS];
  uint8_t reserved2[MT_RING_LINE - 96];

  /* 384: drop counters. */
  _Atomic uint64_t records_no_ring; /* written by a thread that had no ring */
  _Atomic uint64_t records_nested;  /* nested writes of a thread that had no ring yet */
  _Atomic uint64_t claims_failed_full;
  _Atomic uint64_t claims_failed_space;
  _Atomic uint64_t rings_recovered; /* claimed from threads that vanished without releasing */
  /* The program lowered its own address-space limit: the producer gave back (unmapped, and took
   * out of its pool) this many free rings, and a thread later found none of the rest free this
   * many times. */
  _Atomic uint64_t rings_given_back;
  _Atomic uint64_t claims_failed_limit;
  uint8_t reserved3[MT_RING_LINE - 56];

  /* 512: registry allocation (any producer thread). */
  _Atomic uint64_t registry_used;    /* words reserved */
  _Atomic uint64_t registry_commits; /* entries committed: bumped after each commit */
  uint8_t reserved4[MT_RING_LINE - 16];

  /* 640: the primary consumer, written by it (lossless mode). `primary` packs its pid (bits
   * 31..0, so bytes 640..643 little-endian) and its state (bits 63..32, MT_RING_PRIMARY_*), so
   * that a consumer claims both with one compare-and-swap. */
  _Atomic uint64_t primary;
  _Atomic uint64_t primary_start_time; /* published before the state becomes ATTACHED */
  /* The first clock tick: a raw clock reading the primary stored while it polled, which a process
   * with one writing thread stamped its records with. Producers no longer read it and consumers
   * no longer store it (an older producer then reads its clock: slower, never wrong). */
  _Atomic uint64_t clock_tick;
  /* The shared clock tick (ring/tick.h, docs/ring.md §5): raised by the primary at each poll and
   * by writers, stamps for every writing thread. Older producers and consumers leave it alone. */
  _Atomic uint64_t shared_tick;
  uint8_t reserved5[MT_RING_LINE - 32];
} mt_ring_file_header;

/* One per ring, 1024 bytes: the producer's line pair (head, tail, sequence), the primary
 * consumer's, ownership and counters, then the generation history that lets a consumer who
 * resumes mid-ring know which thread wrote what it reads. */
typedef struct mt_ring_block {
  _Atomic uint64_t head;     /* oldest word still intact; free-running */
  _Atomic uint64_t tail;     /* end of the last published record; free-running */
  _Atomic uint64_t next_seq; /* sequence number of the next record; stored before tail */
  _Atomic uint64_t head_seq; /* sequence number of the record at head (producer bookkeeping) */
  uint8_t reserved0[MT_RING_LINE - 32];

  _Atomic uint64_t consumer_pos; /* the primary consumer has read everything before this */
  uint8_t reserved1[MT_RING_LINE - 8];

  _Atomic uint32_t owner_state; /* MT_RING_FREE / MT_RING_CLAIMED */
  _Atomic uint32_t generation;  /* of the current (or last) owner; 0 = never claimed */
  _Atomic int32_t owner_tid;
  /* Words of this ring's data, from its start, whose disk space is reserved (posix_fallocate):
   * grown by the owner as it first writes further (doubling), ring_words once it has wrapped. */
  _Atomic uint32_t reserved_words;
  _Atomic uint64_t overwritten; /* records dropped by the producer unread */
  _Atomic uint64_t nested;      /* writes dropped: interrupted another write */
  _Atomic uint64_t waits;       /* lossless: writes that waited for the consumer */
  uint8_t reserved2[512 - 2 * MT_RING_LINE - 40];

  /* Generation g started at word position history[g % MT_RING_HISTORY].start. The entry is
   * rewritten seqlock-style: generation 0 while in flux. */
  struct {
    _Atomic uint64_t generation;
    _Atomic uint64_t start;
  } history[MT_RING_HISTORY];
} mt_ring_block;

_Static_assert(sizeof(mt_ring_file_header) == 768, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, state) == 256, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, rings_high) == 280, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, signals_handled) == 288, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, records_no_ring) == 384, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, registry_used) == 512, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, registry_commits) == 520, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, primary) == 640, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, clock_tick) == 656, "file header layout");
_Static_assert(offsetof(mt_ring_file_header, shared_tick) == 664, "file header layout");
_Static_assert(sizeof(mt_ring_block) == 1024, "ring block layout");
_Static_assert(offsetof(mt_ring_block, consumer_pos) == 128, "ring block layout");
_Static_assert(offsetof(mt_ring_block, owner_state) == 256, "ring block layout");
_Static_assert(offsetof(mt_ring_block, history) == 512, "ring block layout");
_Static_assert(sizeof(_Atomic uint64_t) == 8, "lock-free 64-bit atomics");

/* Record header word: length (10 bits) | type (6) | id (16) | sequence, low 32 bits. */
static inline uint64_t mt_ring_header_word(uint64_t length, uint64_t type, uint64_t id,
                                           uint64_t seq) {
  return length << 54 | type << 48 | id << 32 | (uint32_t)seq;
}
static inline uint32_t mt_ring_header_length(uint64_t h) {
  return (uint32_t)(h >> 54);
}
static inline uint32_t mt_ring_header_type(uint64_t h) {
  return (uint32_t)(h >> 48) & 63u;
}
static inline uint32_t mt_ring_header_id(uint64_t h) {
  return (uint32_t)(h >> 32) & 0xffffu;
}
static inline uint32_t mt_ring_header_seq(uint64_t h) {
  return (uint32_t)h;
}

/* The primary word: pid and state. */
static inline uint64_t mt_ring_primary_word(int32_t pid, uint32_t state) {
  return (uint64_t)state << 32 | (uint32_t)pid;
}
static inline int32_t mt_ring_primary_pid(uint64_t w) {
  return (int32_t)(uint32_t)w;
}
static inline uint32_t mt_ring_primary_state(uint64_t w) {
  return (uint32_t)(w >> 32);
}

/* Registry entry: [kind (16 bits) << 48 | RESERVED (bit 47) | byte length (32 bits)] [id]
 * [bytes, padded to words]. A writer takes the entry by a compare-and-swap of its first word
 * from 0 to the RESERVED form, which already gives the length, so that a reader can step over an
 * entry not yet filled; it stores the committed form (RESERVED clear) last, with release. 0 means
 * nothing was reserved there yet, and then nothing after it either. */
#define MT_REGISTRY_RESERVED (1ull << 47)
static inline uint64_t mt_registry_header_word(uint64_t kind, uint64_t length) {
  return kind << 48 | length;
}
static inline uint64_t mt_registry_entry_words(uint64_t length) {
  return 2 + (length + 7) / 8;
}

/* The geometry of a file, copied out of its header once it has been validated: nothing a
 * producer (or an attacker) writes to the file later changes how it is indexed. */
typedef struct mt_ring_geometry {
  uint64_t file_size;
  uint32_t header_size;
  uint32_t ring_count;
  uint64_t ring_words;
  uint64_t blocks_offset;
  uint64_t registry_offset;
  uint64_t registry_words;
  uint64_t data_offset;
  uint32_t mode;
  uint32_t clock;
  uint64_t clock_hz;
  uint64_t clock_base;
  uint64_t monotonic_base_ns;
  uint64_t realtime_base_ns;
  int32_t pid;
  int32_t parent_pid;
  uint64_t start_time;
  uint64_t fork_number;
} mt_ring_geometry;

/* Plans a new file's regions (page-aligned) for `rings` rings of `ring_bytes` (a power of two,
 * >= MT_RING_MIN_SIZE) and a registry of `registry_bytes`: sets the layout fields of *geo (sizes
 * and offsets) and leaves the others. MT_E_INVALID if out of range, *geo unchanged. */
int mt_ring_layout_plan(mt_ring_geometry *geo, uint32_t rings, uint64_t ring_bytes,
                        uint64_t registry_bytes, mt_error *err);

/* Writes the immutable part of the header from `geo` (everything but magic). */
void mt_ring_layout_write_header(mt_ring_file_header *h, const mt_ring_geometry *geo);

/* Validates the header of a mapped file of `size` bytes and fills `geo`. MT_E_STATE if the file
 * is still being created (magic 0), MT_E_MALFORMED / MT_E_UNSUPPORTED with the field's offset
 * otherwise. Reads only the first 256 bytes, as plain copies. */
int mt_ring_layout_check(const void *file, uint64_t size, mt_ring_geometry *geo, mt_error *err);

static inline mt_ring_file_header *mt_ring_header_at(void *base) {
  return (mt_ring_file_header *)base;
}
static inline mt_ring_block *mt_ring_block_at(void *base, const mt_ring_geometry *geo,
                                              uint32_t ring) {
  return (mt_ring_block *)((char *)base + geo->blocks_offset +
                           (uint64_t)ring * sizeof(mt_ring_block));
}
static inline _Atomic uint64_t *mt_ring_data_at(void *base, const mt_ring_geometry *geo,
                                                uint32_t ring) {
  return (_Atomic uint64_t *)((char *)base + geo->data_offset +
                              (uint64_t)ring * geo->ring_words * 8);
}
static inline _Atomic uint64_t *mt_ring_registry_at(void *base, const mt_ring_geometry *geo) {
  return (_Atomic uint64_t *)((char *)base + geo->registry_offset);
}

#endif
