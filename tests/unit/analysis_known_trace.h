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

/* The sources trace: rate 0.5 (16 bytes per sample), one domain, runtime parameters `params`
 * ("memtap-test" makes it a memtap trace, whose sources are named malloc / mapped), every
 * allocation at site fn_101_2 file_21.c:101:
 *
 *   t(µs)  event                          objects estimated = 1 / (1 - 0.5^w)
 *   10     alloc m0 minor,    1 word,  1 sample    w = 1 + header = 2: 4/3
 *   20     alloc m1 minor,    1 word,  1 sample    4/3
 *   30     alloc m2 minor,    1 word,  1 sample    4/3
 *   40     alloc j0 major,    2 words, 1 sample    w = 3: 8/7
 *   50     alloc e0 external, 1 word,  1 sample    w = 1 (no header): 2
 *   60     alloc e1 external, 2 words, 2 samples   w = 2: 4/3
 *   70     promote m0
 *   80     promote m1
 *   90     collect m2
 *   100    collect j0
 *   110    collect j0 again          unknown: no longer live
 *   120    promote m2                unknown: no longer live
 */
uint8_t *known_sources_trace(const char *params, size_t *size);

/* The stacks trace: rate 1, runtime parameters "s=4M" (an OCaml trace), minor allocations on two
 * domains, with named frames (codes: 1 main main.ml:1, 2 run main.ml:5, 3 parse parser.ml:10,
 * 4 parse parser.ml:20, 5 lex parser.ml:30, 6 walk tree.ml:7, 7 xmalloc alloc.c:3, 8 no
 * location, shown as $8). Backtraces outermost first:
 *
 *   t(µs)  dom  event                 backtrace                         site
 *   10     0    alloc s1, 10 words    main run parse:10                 parse parser.ml:10
 *   20     0    alloc s2, 20 words    main walk walk walk parse:10      parse parser.ml:10
 *   30     0    alloc s3,  5 words    main run parse:20                 parse parser.ml:20
 *   40     1    alloc s4,  3 words    main run parse:10 lex             lex parser.ml:30
 *   50     0    alloc s5,  8 words    main run lex xmalloc              xmalloc alloc.c:3
 *   60     1    alloc s6,  1 word     main walk $8                      walk tree.ml:7
 *   70     0    collect s5            temporary: domain 0 allocated nothing since s5
 *   80     0    collect s1
 *   90     1    collect s4            not temporary: domain 1 allocated s6 since s4
 */
uint8_t *known_stacks_trace(size_t *size);

/* Writes `data` to a file named `name` in the test's temporary directory; returns its path. */
const char *known_trace_file(const char *name, const uint8_t *data, size_t size);

#endif
