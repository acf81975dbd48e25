/* Separate debug files with compressed sections, inflated once for libdw (inflate.c). */
#ifndef MEMTAP_RECORD_INFLATE_H
#define MEMTAP_RECORD_INFLATE_H

/* `fd` (an open ELF file) when none of its .debug_* sections is zlib-compressed (SHF_COMPRESSED)
 * or anything fails; otherwise a new file descriptor (a memfd, `fd` closed) of the same ELF with
 * those sections inflated and no longer flagged compressed, except .debug_loclists and .debug_loc
 * (variable locations, which the symboliser never reads), which become SHT_NOBITS. Every other
 * byte keeps its offset, so program headers and notes still describe the file. */
int rec_inflate_debug_file(int fd);

/* Loads libdeflate (once, if installed). rec_inflate_debug_file does it when first needed; a
 * recorder calls it when it is made, because in-process mode finishes the trace inside the
 * program's exit (docs/tracer.md §9), where loading a library would run among the destructors. */
void rec_inflate_load(void);

#endif
