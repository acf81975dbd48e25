/* How large a POSIX extended regular expression grows once regcomp expands its repetitions:
 * glibc copies a repeated atom or group for every repetition ("a{1000}" is 1000 copies, "a+" two,
 * and repetitions of repetitions multiply), so a 500-byte pattern such as "o+++...+" or
 * "((a{99}){99}){99}" makes regcomp take gigabytes. Patterns come from the command line (--hide,
 * --focus, callers): those whose expansion passes MT_REGEX_EXPANSION_MAX are refused before
 * regcomp sees them. The count is an upper estimate on the pattern's structure; a malformed
 * pattern is left for regcomp to refuse. */
#ifndef MEMTAP_SRC_COMMON_REGEX_BOUND_H
#define MEMTAP_SRC_COMMON_REGEX_BOUND_H

#include <stddef.h>
#include <stdint.h>

#define MT_REGEX_EXPANSION_MAX 100000u

/* Saturating product and sum, at the bound's square (far past the bound, never overflowing). */
static inline uint64_t mt_regex_cap(uint64_t v) {
  return v > (uint64_t)MT_REGEX_EXPANSION_MAX * MT_REGEX_EXPANSION_MAX
             ? (uint64_t)MT_REGEX_EXPANSION_MAX * MT_REGEX_EXPANSION_MAX
             : v;
}

/* The copies a repetition operator at p makes of its operand (0: not one), and its length. */
static inline uint64_t mt_regex_repeat(const char *p, size_t *len) {
  if (*p == '*' || *p == '?') {
    *len = 1;
    return 1;
  }
  if (*p == '+') {
    *len = 1;
    return 2;
  }
  if (*p != '{')
    return 0;
  uint64_t lo = 0, hi = 0;
  const char *q = p + 1;
  if (*q < '0' || *q > '9')
    return 0;
  while (*q >= '0' && *q <= '9')
    lo = mt_regex_cap(lo * 10 + (uint64_t)(*q++ - '0'));
  hi = lo;
  if (*q == ',') {
    q++;
    hi = 0;
    while (*q >= '0' && *q <= '9')
      hi = mt_regex_cap(hi * 10 + (uint64_t)(*q++ - '0'));
    if (hi < lo) /* "{m,}": m copies and a starred one */
      hi = lo + 1;
  }
  if (*q != '}')
    return 0;
  *len = (size_t)(q + 1 - p);
  return hi ? hi : 1;
}

/* The expanded size of the alternation starting at *pp, up to a ')' at nesting `depth` > 0 or
 * the end; *pp is left on that ')' or the end. */
static inline uint64_t mt_regex_alternation(const char **pp, int depth) {
  const char *p = *pp;
  uint64_t total = 0, branch = 0;
  while (*p && !(*p == ')' && depth > 0)) {
    uint64_t atom = 1;
    if (*p == '|') {
      total = mt_regex_cap(total + branch);
      branch = 0;
      p++;
      continue;
    }
    if (*p == '(') {
      p++;
      atom = mt_regex_alternation(&p, depth + 1);
      if (*p == ')')
        p++;
    } else if (*p == '[') { /* a bracket expression: "]" first is literal; [:class:] inside */
      p++;
      if (*p == '^')
        p++;
      if (*p == ']')
        p++;
      while (*p && *p != ']') {
        if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
          char kind = p[1];
          p += 2;
          while (*p && !(*p == kind && p[1] == ']'))
            p++;
          if (*p)
            p += 2;
        } else {
          p++;
        }
      }
      if (*p)
        p++;
    } else if (*p == '\\') {
      p += p[1] ? 2 : 1;
    } else {
      p++;
    }
    size_t len;
    for (uint64_t copies; (copies = mt_regex_repeat(p, &len)) != 0; p += len)
      atom = mt_regex_cap(atom * copies);
    branch = mt_regex_cap(branch + atom);
  }
  *pp = p;
  return mt_regex_cap(total + branch);
}

/* The expanded size of `pattern` (saturated far past MT_REGEX_EXPANSION_MAX). */
static inline uint64_t mt_regex_expansion(const char *pattern) {
  const char *p = pattern;
  uint64_t total = 0;
  for (;;) {
    total = mt_regex_cap(total + mt_regex_alternation(&p, 0));
    if (!*p)
      return total;
    p++; /* an unbalanced ')': regcomp refuses it; count on */
  }
}

#endif
