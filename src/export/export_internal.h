/* What the exporters of src/export share: the per-format entry points behind mt_export, JSON string
 * output, and stacks as lists of names. */
#ifndef MEMTAP_SRC_EXPORT_INTERNAL_H
#define MEMTAP_SRC_EXPORT_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "memtap/export.h"

int mt_export_pprof(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err);
int mt_export_speedscope(const mt_analysis *a, FILE *out, const mt_export_options *o,
                         mt_error *err);
int mt_export_chrome(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err);
int mt_export_folded(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err);
int mt_export_flame_svg(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err);
int mt_export_html(const mt_analysis *a, FILE *out, const mt_export_options *o, mt_error *err);

/* A JSON string literal for NUL-terminated bytes; invalid UTF-8 bytes become \udcXX (as the CLI's
 * --json outputs do). */
void mt_json_string(FILE *out, const char *s);
/* The same with at most `max` bytes between the quotes: a longer string is cut after a whole
 * character (or escape) and ends with "…". */
void mt_json_string_cut(FILE *out, const char *s, size_t max);

/* Which stacks an export keeps: `*keep` is NULL (all of them) without o->focus, else malloc'd,
 * one flag per stack (mt_stacks_through; the caller frees). MT_OK, MT_E_INVALID, MT_E_NOMEM. */
int mt_export_focus(const mt_analysis *a, const mt_export_options *o, bool **keep, mt_error *err);

/* A stack's values under `metric`, apportioned so that they add up to the rounded total of the
 * whole analysis (malloc'd, one per stack; NULL when memory runs out). With `keep` (not NULL),
 * the other stacks' values are 0 and the kept ones add up to their own rounded total. */
int64_t *mt_export_stack_values(const mt_analysis *a, mt_metric metric, const bool *keep);

/* mt_export_stack_values of the stacks o->focus keeps, in *values (NULL on failure): MT_OK,
 * MT_E_INVALID (a bad focus), MT_E_NOMEM. */
int mt_export_values(const mt_analysis *a, const mt_export_options *o, mt_metric metric,
                     int64_t **values, mt_error *err);

/* The same for the estimated objects of an amount of each stack's stats: allocated, or in use
 * (live at the end, or at the peak with `at_peak`). */
int64_t *mt_export_stack_objects(const mt_analysis *a, bool inuse, bool at_peak, const bool *keep);

/* Writes text escaped for XML/HTML. */
void mt_xml_text(FILE *out, const char *s);

#endif
