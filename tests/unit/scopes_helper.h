/* Code for the scope index's test (test_record_scopes.c), compiled -O2 -g (record.cmake): the
 * scopes the index must find as libdw does. */
#ifndef MEMTAP_SCOPES_HELPER_H
#define MEMTAP_SCOPES_HELPER_H

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the helper's code (so that none of it is thrown away) and returns a checksum. */
long scopes_helper_run(int n);

#ifdef __cplusplus
}
#endif

#endif
