/* A small trace with a known event stream, written by mt_writer at rate 1 (every allocation
 * recorded, estimates equal real sizes), whose every number the analysis tests check:
 *
 *   t(µs)  event                     site
 *   10     alloc id0, 10 words       A = fn_101_2 file_21.c:101   (stack 101 <- 200 <- 300)
 *   20     alloc id1,  4 words       B = fn_102_0 file_22.c:102   (stack 102 <- 200 <- 300)
 *   30     collect id1               temporary: nothing allocated since id1
 *   40     alloc id2, 10 words       A
 *   50     alloc id3, 100 words      B      -> peak: 120 words = 960 bytes
 *   60     collect id0
 *   70     collect id3               temporary: nothing allocated since id3
 *   80     alloc id4,  2 words       A
 *
 * At the end id2 and id4 are live: 12 words = 96 bytes, both at site A. External source, nsamples
 * = length, word size 64. */
#ifndef MEMTAP_TESTS_KNOWN_TRACE_H
#define MEMTAP_TESTS_KNOWN_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* The trace's bytes (caller frees). */
uint8_t *known_trace(size_t *size);

/* The same at `rate` with `nsamples` per allocation scaled: used for the fractional-rate test. */
uint8_t *known_trace_at_rate(double rate, size_t *size);

/* The same stream with id4 of `last_words` words instead of 2 (the other side of `diff`). */
uint8_t *known_trace_variant(int64_t last_words, size_t *size);

/* Writes `data` to a file named `name` in the test's temporary directory; returns its path. */
const char *known_trace_file(const char *name, const uint8_t *data, size_t size);

#endif
