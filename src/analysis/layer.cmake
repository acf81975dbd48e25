# src/analysis: the streaming analysis model (analysis.h); src/export: what reads it (pprof,
# speedscope, Chrome trace, folded stacks, the HTML report). Both read traces only through the
# reader API (DESIGN.md §2).
add_library(memtap_analysis OBJECT
  analysis/pairmap.c
  analysis/stacks.c
  analysis/estimate.c
  analysis/timeline.c
  analysis/pass.c
  analysis/groups.c)
list(APPEND MEMTAP_LAYERS memtap_analysis)
