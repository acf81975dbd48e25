/* The inclusive-cost table (pprof's flat and cum columns) that `memtap functions` and `memtap top
 * --inclusive` print, from src/analysis/views.h. */
#ifndef MEMTAP_CLI_FUNCTIONS_VIEW_H
#define MEMTAP_CLI_FUNCTIONS_VIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "analysis_cli.h"

typedef struct functions_view {
  mt_group_by by;
  mt_metric metric;
  bool by_flat;      /* rank by flat instead of cum */
  const char *focus; /* only the backtraces through a function matching this regex; NULL: all */
  size_t limit;      /* rows shown, 0 for all */
} functions_view;

/* Loads `path` with the shared options and prints the table (text, or JSON with ao->json);
 * prints errors as `cmd`'s; returns an exit status. */
int functions_view_run(const char *cmd, const char *path, const an_options *ao,
                       const functions_view *v);

#endif
