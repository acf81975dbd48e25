# src/tracer: the preload shim libmemtap-preload.so (docs/tracer.md), a shared object of its own,
# not part of libmemtap. It links the objects of the common and ring layers (the ring producer
# is malloc-free), exports only the interposed functions (exports.map), and is built without
# sanitizers or fuzzing instrumentation even when the rest of the tree has them: it is preloaded
# into uninstrumented programs. The configuration parser (config.c) is also compiled into
# libmemtap, so that `memtap record` validates the variables exactly as the shim reads them, and
# so is control_api.c: mt_tracer_start/stop, which call the shim's control entry points.
set(MEMTAP_TRACER_SHIM_SOURCES
  tracer/bootstrap.c
  tracer/state.c
  tracer/malloc.c
  tracer/mmap.c
  tracer/mlock.c
  tracer/own_objects.c
  tracer/rlimit.c
  tracer/threads.c
  tracer/clone.c
  tracer/modules.c
  tracer/record.c
  tracer/signals.c
  tracer/longjmp.c
  tracer/eh_frame.c
  tracer/unwind_cfi.c
  tracer/unwind.c
  tracer/inprocess.c
  tracer/ending.c
  tracer/credentials.c
  tracer/sandbox.c
  tracer/deepbind.c
  tracer/control.c)
set(MEMTAP_TRACER_PURE_SOURCES tracer/config.c tracer/sampler.c tracer/sampled_set.c)

target_sources(memtap PRIVATE tracer/config.c tracer/control_api.c)
target_sources(memtap_static PRIVATE tracer/config.c tracer/control_api.c)
set_source_files_properties(tracer/config.c tracer/control_api.c PROPERTIES INCLUDE_DIRECTORIES
                            "${PROJECT_SOURCE_DIR}/src")

# The pure parts, instrumented like the rest of the tree, for the unit tests.
add_library(memtap_tracer_pure STATIC ${MEMTAP_TRACER_PURE_SOURCES})
target_include_directories(memtap_tracer_pure PUBLIC ${PROJECT_SOURCE_DIR}/include
                                              PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(memtap_tracer_pure PUBLIC m)

# Flags without instrumentation: the directory's compile and link options minus -fsanitize=...
get_directory_property(_mt_dir_opts COMPILE_OPTIONS)
get_directory_property(_mt_dir_link_opts LINK_OPTIONS)
set(_mt_clean_opts "")
foreach(opt IN LISTS _mt_dir_opts)
  if(NOT opt MATCHES "^-fsanitize" AND NOT opt MATCHES "^-fno-sanitize")
    list(APPEND _mt_clean_opts ${opt})
  endif()
endforeach()
set(_mt_clean_link_opts "")
foreach(opt IN LISTS _mt_dir_link_opts)
  if(NOT opt MATCHES "^-fsanitize" AND NOT opt MATCHES "^-fno-sanitize")
    list(APPEND _mt_clean_link_opts ${opt})
  endif()
endforeach()

# The tests build the programs they preload the shim into with the same clean flags.
set_property(GLOBAL PROPERTY MEMTAP_CLEAN_COMPILE_OPTIONS "${_mt_clean_opts}")
set_property(GLOBAL PROPERTY MEMTAP_CLEAN_LINK_OPTIONS "${_mt_clean_link_opts}")

if(MEMTAP_SANITIZE OR MEMTAP_FUZZ)
  # The layer objects of this build are instrumented: compile their sources again, clean.
  get_target_property(_mt_common_src memtap_common SOURCES)
  get_target_property(_mt_ring_src memtap_ring SOURCES)
  add_library(memtap_preload_layers OBJECT ${_mt_common_src} ${_mt_ring_src})
  set_target_properties(memtap_preload_layers PROPERTIES COMPILE_OPTIONS "${_mt_clean_opts}")
  target_include_directories(memtap_preload_layers PRIVATE ${PROJECT_SOURCE_DIR}/include
                                                           ${PROJECT_SOURCE_DIR}/src)
  set(_mt_layer_objects $<TARGET_OBJECTS:memtap_preload_layers>)
else()
  set(_mt_layer_objects $<TARGET_OBJECTS:memtap_common> $<TARGET_OBJECTS:memtap_ring>)
endif()

add_library(memtap_preload SHARED ${MEMTAP_TRACER_SHIM_SOURCES} ${MEMTAP_TRACER_PURE_SOURCES}
                                  ${_mt_layer_objects})
set_target_properties(memtap_preload PROPERTIES
  OUTPUT_NAME memtap-preload
  PREFIX lib
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
  COMPILE_OPTIONS "${_mt_clean_opts}"
  LINK_OPTIONS "${_mt_clean_link_opts}"
  C_VISIBILITY_PRESET hidden
  LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tracer/exports.map)
target_compile_options(memtap_preload PRIVATE -ftls-model=initial-exec)
target_include_directories(memtap_preload PRIVATE ${PROJECT_SOURCE_DIR}/include
                                                  ${PROJECT_SOURCE_DIR}/src)
target_link_options(memtap_preload PRIVATE
  -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/tracer/exports.map -Wl,-z,nodelete
  -Wl,-z,now)
target_link_libraries(memtap_preload PRIVATE Threads::Threads ${CMAKE_DL_LIBS} m)
install(TARGETS memtap_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/memtap)
