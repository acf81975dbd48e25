/* Planning a new ring file's regions and validating a mapped one (layout.h). Validation is the
 * first thing a consumer does with a file it did not write, so every field is checked against
 * the file's real size before anything is indexed through it, with no arithmetic that can
 * overflow. */
#include "ring/layout.h"

#include <string.h>

#include "common/error.h"

#define PAGE 4096u

static uint64_t round_up(uint64_t x, uint64_t to) {
  return (x + to - 1) / to * to;
}

static int is_power_of_two(uint64_t x) {
  return x && !(x & (x - 1));
}

int mt_ring_layout_plan(mt_ring_geometry *geo, uint32_t rings, uint64_t ring_bytes,
                        uint64_t registry_bytes, mt_error *err) {
  if (ring_bytes < MT_RING_MIN_SIZE)
    return mt_fail(err, MT_E_INVALID, -1,
                   "ring size %llu bytes is smaller than the largest record (%u bytes): the "
                   "minimum ring size is %u bytes",
                   (unsigned long long)ring_bytes, MT_RING_MAX_RECORD_WORDS * 8, MT_RING_MIN_SIZE);
  if (!is_power_of_two(ring_bytes) || ring_bytes / 8 > MT_RING_MAX_WORDS)
    return mt_fail(err, MT_E_INVALID, -1,
                   "ring size %llu bytes is not a power of two of at most %llu bytes",
                   (unsigned long long)ring_bytes, MT_RING_MAX_WORDS * 8);
  if (rings == 0 || rings > MT_RING_MAX_RINGS)
    return mt_fail(err, MT_E_INVALID, -1, "ring count %u is not between 1 and %u", rings,
                   MT_RING_MAX_RINGS);
  if (registry_bytes > (1ull << 30))
    return mt_fail(err, MT_E_INVALID, -1, "registry size %llu bytes is larger than 1 GiB",
                   (unsigned long long)registry_bytes);
  geo->header_size = PAGE;
  geo->ring_count = rings;
  geo->ring_words = ring_bytes / 8;
  geo->blocks_offset = PAGE;
  geo->registry_offset =
      round_up(geo->blocks_offset + (uint64_t)rings * sizeof(mt_ring_block), PAGE);
  geo->registry_words = round_up(registry_bytes, PAGE) / 8;
  geo->data_offset = geo->registry_offset + geo->registry_words * 8;
  geo->file_size = geo->data_offset + (uint64_t)rings * ring_bytes;
  return MT_OK;
}

void mt_ring_layout_write_header(mt_ring_file_header *h, const mt_ring_geometry *geo) {
  h->version = MT_RING_VERSION;
  h->header_size = geo->header_size;
  h->file_size = geo->file_size;
  h->ring_count = geo->ring_count;
  h->ring_block_size = sizeof(mt_ring_block);
  h->ring_words = geo->ring_words;
  h->blocks_offset = geo->blocks_offset;
  h->registry_offset = geo->registry_offset;
  h->registry_words = geo->registry_words;
  h->data_offset = geo->data_offset;
  h->max_record_words = MT_RING_MAX_RECORD_WORDS;
  h->mode = geo->mode;
  h->clock = geo->clock;
  h->clock_hz = geo->clock_hz;
  h->clock_base = geo->clock_base;
  h->monotonic_base_ns = geo->monotonic_base_ns;
  h->realtime_base_ns = geo->realtime_base_ns;
  h->pid = geo->pid;
  h->parent_pid = geo->parent_pid;
  h->start_time = geo->start_time;
  h->fork_number = geo->fork_number;
}

#define FIELD(name) ((int64_t)offsetof(mt_ring_file_header, name))

/* Checks that [offset, offset + bytes) starts 64-byte aligned at or after `floor` and ends
 * within `limit`; on success *end is its end. */
static int check_region(const char *what, int64_t field, uint64_t offset, uint64_t count,
                        uint64_t unit, uint64_t floor, uint64_t limit, uint64_t *end,
                        mt_error *err) {
  uint64_t bytes;
  if (__builtin_mul_overflow(count, unit, &bytes) || offset % 64 || offset < floor ||
      offset > limit || bytes > limit - offset)
    return mt_fail(err, MT_E_MALFORMED, field,
                   "malformed ring file at byte %lld: the %s (offset %llu, %llu x %llu bytes) "
                   "does not fit between byte %llu and the end of the file (%llu bytes)",
                   (long long)field, what, (unsigned long long)offset, (unsigned long long)count,
                   (unsigned long long)unit, (unsigned long long)floor, (unsigned long long)limit);
  *end = offset + bytes;
  return MT_OK;
}

int mt_ring_layout_check(const void *file, uint64_t size, mt_ring_geometry *geo, mt_error *err) {
  /* Only the immutable first 256 bytes are read, as a plain copy: what follows is live state. */
  mt_ring_file_header h;
  if (size < sizeof h)
    return mt_fail(err, MT_E_MALFORMED, 0,
                   "malformed ring file: %llu bytes is too short for a ring file header "
                   "(%zu bytes)",
                   (unsigned long long)size, sizeof h);
  memcpy(&h, file, 256);
  uint64_t magic;
  memcpy(&magic, file, sizeof magic);
  if (magic == 0)
    return mt_fail(err, MT_E_STATE, 0, "the ring file is still being created (no magic yet)");
  if (magic != MT_RING_MAGIC)
    return mt_fail(err, MT_E_MALFORMED, 0, "not a memtap ring file (bad magic %016llx)",
                   (unsigned long long)magic);
  if (h.version != MT_RING_VERSION)
    return mt_fail(err, MT_E_UNSUPPORTED, FIELD(version),
                   "ring file version %u is not supported (this memtap reads version %u)",
                   h.version, MT_RING_VERSION);
  if (h.file_size > size)
    return mt_fail(err, MT_E_MALFORMED, FIELD(file_size),
                   "truncated ring file: the header says %llu bytes, the file has %llu",
                   (unsigned long long)h.file_size, (unsigned long long)size);
  if (h.header_size < sizeof h || h.header_size % 64 || h.header_size > h.file_size)
    return mt_fail(err, MT_E_MALFORMED, FIELD(header_size),
                   "malformed ring file at byte %lld: header size %u",
                   (long long)FIELD(header_size), h.header_size);
  if (h.ring_count == 0 || h.ring_count > MT_RING_MAX_RINGS)
    return mt_fail(err, MT_E_MALFORMED, FIELD(ring_count),
                   "malformed ring file at byte %lld: %u rings (1 to %u allowed)",
                   (long long)FIELD(ring_count), h.ring_count, MT_RING_MAX_RINGS);
  if (h.ring_block_size != sizeof(mt_ring_block))
    return mt_fail(err, MT_E_MALFORMED, FIELD(ring_block_size),
                   "malformed ring file at byte %lld: ring block size %u (expected %zu)",
                   (long long)FIELD(ring_block_size), h.ring_block_size, sizeof(mt_ring_block));
  if (!is_power_of_two(h.ring_words) || h.ring_words < MT_RING_MIN_WORDS ||
      h.ring_words > MT_RING_MAX_WORDS)
    return mt_fail(err, MT_E_MALFORMED, FIELD(ring_words),
                   "malformed ring file at byte %lld: ring size %llu words is not a power of two "
                   "between %u and %llu",
                   (long long)FIELD(ring_words), (unsigned long long)h.ring_words,
                   MT_RING_MIN_WORDS, MT_RING_MAX_WORDS);
  if (h.max_record_words != MT_RING_MAX_RECORD_WORDS)
    return mt_fail(err, MT_E_MALFORMED, FIELD(max_record_words),
                   "malformed ring file at byte %lld: largest record %u words (expected %u)",
                   (long long)FIELD(max_record_words), h.max_record_words,
                   MT_RING_MAX_RECORD_WORDS);
  if (h.mode > MT_RING_LOSSLESS)
    return mt_fail(err, MT_E_MALFORMED, FIELD(mode), "malformed ring file at byte %lld: mode %u",
                   (long long)FIELD(mode), h.mode);
  if (h.clock < MT_RING_CLOCK_TSC || h.clock > MT_RING_CLOCK_REALTIME ||
      (h.clock == MT_RING_CLOCK_TSC && h.clock_hz == 0))
    return mt_fail(err, MT_E_MALFORMED, FIELD(clock),
                   "malformed ring file at byte %lld: clock %u at %llu Hz", (long long)FIELD(clock),
                   h.clock, (unsigned long long)h.clock_hz);

  /* The regions, in file order, each after the previous one and inside the file. */
  uint64_t end;
  int rc = check_region("ring blocks", FIELD(blocks_offset), h.blocks_offset, h.ring_count,
                        sizeof(mt_ring_block), h.header_size, h.file_size, &end, err);
  if (rc == MT_OK)
    rc = check_region("registry", FIELD(registry_offset), h.registry_offset, h.registry_words, 8,
                      end, h.file_size, &end, err);
  if (rc == MT_OK)
    rc = check_region("ring data", FIELD(data_offset), h.data_offset, h.ring_count,
                      h.ring_words * 8, end, h.file_size, &end, err);
  if (rc != MT_OK)
    return rc;

  memset(geo, 0, sizeof *geo);
  geo->file_size = h.file_size;
  geo->header_size = h.header_size;
  geo->ring_count = h.ring_count;
  geo->ring_words = h.ring_words;
  geo->blocks_offset = h.blocks_offset;
  geo->registry_offset = h.registry_offset;
  geo->registry_words = h.registry_words;
  geo->data_offset = h.data_offset;
  geo->mode = h.mode;
  geo->clock = h.clock;
  geo->clock_hz = h.clock_hz;
  geo->clock_base = h.clock_base;
  geo->monotonic_base_ns = h.monotonic_base_ns;
  geo->realtime_base_ns = h.realtime_base_ns;
  geo->pid = h.pid;
  geo->parent_pid = h.parent_pid;
  geo->start_time = h.start_time;
  geo->fork_number = h.fork_number;
  return MT_OK;
}
