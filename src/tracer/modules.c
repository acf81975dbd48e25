/* The loaded modules (docs/tracer.md, "Modules"): a MT_TRACER_REGISTRY_MODULE entry for every
 * object in the process (load bias, address range, build-id, path), taken from dl_iterate_phdr
 * at start, and again after a dlopen or dlclose, with MT_TRACER_REC_MODULE_UNLOAD for those that
 * went away. Never on the hot path: a scan happens when tracing starts, after dlclose, at the
 * first record after a dlopen, and when a recorded frame lies in no known module while a dlopen
 * is under way (the constructors of the library being opened).
 *
 * dlopen is interposed by a tail-jumping assembly stub, so that the real dlopen sees the
 * program's return address: glibc picks the caller's object to search its RPATH/RUNPATH and
 * namespace, which a C wrapper would change to the shim's. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "tracer/loaded_object.h"
#include "tracer/shim.h"
#include "tracer/unwind_cfi.h"

#define MT_EXPORT __attribute__((visibility("default")))
#define MT_MAX_MODULES 4096u

_Atomic uint64_t mt_dl_pending;
void *mt_dl_real_open;

typedef struct module {
  uint64_t load_bias, low, high;
  const char *name; /* the loader's string: identifies the instance with the addresses */
  uint64_t serial;
  uintptr_t cfi_text_lo; /* its key in the cached unwinder's table, 0 if not there */
  _Atomic int alive;
  int seen;
} module;

static module modules[MT_MAX_MODULES];
static _Atomic unsigned module_count;
static uint64_t next_serial = 1;
static pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
uint64_t mt_modules_scanned_pending; /* mt_dl_pending at the last scan */
static uint64_t miss_pending = UINT64_MAX;
static bool register_known; /* scan_one registers modules it already knows (a new ring file) */
static _Atomic unsigned misses;

/* The build-id note of a loaded object, read from its mapped PT_NOTE segments. */
static size_t build_id(const struct dl_phdr_info *info, const uint8_t **out) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
    const uint8_t *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
      size_t name_size = (n->n_namesz + 3u) & ~3u, desc_size = (n->n_descsz + 3u) & ~3u;
      const uint8_t *desc = p + sizeof *n + name_size;
      if (desc + desc_size > end)
        break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(p + sizeof *n, "GNU", 4)) {
        *out = desc;
        return n->n_descsz;
      }
      p = desc + desc_size;
    }
  }
  return 0;
}

static void register_module(const module *m, const struct dl_phdr_info *info, bool main_program) {
  static struct {
    mt_tracer_module h;
    uint8_t bytes[4096 + 256];
  } buf;
  const uint8_t *id = NULL;
  size_t id_length = build_id(info, &id);
  if (id_length > 256)
    id_length = 0;
  memcpy(buf.bytes, id, id_length);
  size_t path_length = 0;
  char *path = (char *)buf.bytes + id_length;
  if (main_program) {
    ssize_t n = readlink("/proc/self/exe", path, 4096);
    path_length = n > 0 ? (size_t)n : 0;
  } else if (info->dlpi_name) {
    path_length = strnlen(info->dlpi_name, 4096);
    memcpy(path, info->dlpi_name, path_length);
  }
  buf.h.load_bias = m->load_bias;
  buf.h.low = m->low;
  buf.h.high = m->high;
  buf.h.build_id_length = (uint32_t)id_length;
  buf.h.path_length = (uint32_t)path_length;
  mt_ring_register(mt_shim.ring, MT_TRACER_REGISTRY_MODULE, m->serial, &buf,
                   sizeof buf.h + id_length + path_length);
}

static int scan_one(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  unsigned *index = data;
  uint64_t low, high;
  mt_loaded_span(info, &low, &high);
  bool main_program = (*index)++ == 0;
  if (low >= high)
    return 0;
  unsigned n = atomic_load_explicit(&module_count, memory_order_relaxed);
  for (unsigned i = 0; i < n; i++) {
    module *m = &modules[i];
    if (atomic_load_explicit(&m->alive, memory_order_relaxed) && m->load_bias == info->dlpi_addr &&
        m->low == low && m->high == high && m->name == info->dlpi_name) {
      m->seen = 1;
      if (register_known)
        register_module(m, info, main_program);
      return 0;
    }
  }
  if (n == MT_MAX_MODULES)
    return 0;
  module *m = &modules[n];
  m->load_bias = info->dlpi_addr;
  m->low = low;
  m->high = high;
  m->name = info->dlpi_name;
  m->serial = next_serial++;
  m->seen = 1;
  register_module(m, info, main_program); /* before any record can point into it */
  mt_cfi_module cfi;
  m->cfi_text_lo = 0;
  if (mt_cfi_module_from_phdr(info, &cfi) == MT_OK && mt_cfi_add_module(&cfi) == MT_OK)
    m->cfi_text_lo = cfi.text_lo;
  atomic_store_explicit(&m->alive, 1, memory_order_relaxed);
  atomic_store_explicit(&module_count, n + 1, memory_order_release);
  return 0;
}

static void scan_locked(void) {
  unsigned n = atomic_load_explicit(&module_count, memory_order_relaxed);
  for (unsigned i = 0; i < n; i++)
    modules[i].seen = 0;
  unsigned index = 0;
  dl_iterate_phdr(scan_one, &index);
  for (unsigned i = 0; i < n; i++) {
    module *m = &modules[i];
    if (m->seen || !atomic_load_explicit(&m->alive, memory_order_relaxed))
      continue;
    atomic_store_explicit(&m->alive, 0, memory_order_release);
    if (m->cfi_text_lo)
      mt_cfi_remove_module(m->cfi_text_lo);
    uint64_t serial = m->serial;
    mt_record_write(MT_TRACER_REC_MODULE_UNLOAD, 0, &serial, 1);
  }
}

/* `wait`: take the lock (start, dlclose); else only try it (the record path, which may run in a
 * signal handler that interrupted a scan on its own thread) and skip the scan if it is taken. */
static void scan(bool wait) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  if (wait ? pthread_mutex_lock(&scan_lock) == 0 : pthread_mutex_trylock(&scan_lock) == 0) {
    mt_modules_scanned_pending = atomic_load(&mt_dl_pending);
    scan_locked();
    pthread_mutex_unlock(&scan_lock);
  }
  t->depth--;
}

void mt_modules_scan(void) {
  scan(true);
}

static bool known(uint64_t pc) {
  unsigned n = atomic_load_explicit(&module_count, memory_order_acquire);
  for (unsigned i = 0; i < n; i++) {
    const module *m = &modules[i];
    if (pc - m->low < m->high - m->low && atomic_load_explicit(&m->alive, memory_order_relaxed))
      return true;
  }
  return false;
}

void mt_modules_check(const uint64_t *pcs, size_t n) {
  uint64_t pending = atomic_load_explicit(&mt_dl_pending, memory_order_acquire);
  if (pending != mt_modules_scanned_pending) {
    scan(false);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (known(pcs[i]))
      continue;
    /* A frame in no known module: a library whose constructors run inside a dlopen that the last
     * scan came too early for, or code outside any module (JIT), for which a scan now and then
     * is enough. */
    if (pending != miss_pending || atomic_fetch_add(&misses, 1) >= 4096) {
      miss_pending = pending;
      atomic_store(&misses, 0);
      scan(false);
    }
    return;
  }
}

void mt_modules_register_again(void) {
  mt_shim_thread *t = &mt_shim_self;
  t->depth++;
  if (pthread_mutex_lock(&scan_lock) == 0) {
    register_known = true;
    mt_modules_scanned_pending = atomic_load(&mt_dl_pending);
    scan_locked();
    register_known = false;
    pthread_mutex_unlock(&scan_lock);
  }
  t->depth--;
}

void mt_modules_after_fork(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&scan_lock, &fresh, sizeof fresh);
}

/* ---------------------------------------------------------------------------------------------
 * dlopen, dlclose
 * ------------------------------------------------------------------------------------------- */

/* dlopen before the next allocator was resolved (a constructor that runs before the shim's):
 * resolve, then call it (the caller's object is the shim's this once). */
MT_HIDDEN void *mt_dlopen_unresolved(const char *file, int flags);
void *mt_dlopen_unresolved(const char *file, int flags) {
  mt_shim_self.depth++;
  mt_shim_resolve();
  mt_shim_self.depth--;
  void *(*real)(const char *, int) = (void *(*)(const char *, int))mt_dl_real_open;
  return real ? real(file, flags) : NULL;
}

/* RTLD_DEEPBIND (deepbind.c): asked mt_dlopen_deep_takes(file, flags, caller) first, with the
 * arguments kept on the stack, and sent to mt_dlopen_deep when it says yes. */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        ".p2align 4\n"
        "dlopen:\n"
        "  .cfi_startproc\n"
        "  lock incq mt_dl_pending(%rip)\n"
        "  testl $8, %esi\n" /* RTLD_DEEPBIND */
        "  jnz 2f\n"
        "0:\n"
        "  movq mt_dl_real_open(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 1f\n"
        "  jmp *%rax\n"
        "1:\n"
        "  jmp mt_dlopen_unresolved\n"
        "2:\n"
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  movq 24(%rsp), %rdx\n" /* the caller's return address */
        "  call mt_dlopen_deep_takes\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  testl %eax, %eax\n"
        "  jz 0b\n"
        "  jmp mt_dlopen_deep\n"
        "  .cfi_endproc\n"
        ".size dlopen, .-dlopen\n");

MT_EXPORT int dlclose(void *handle) {
  if (!mt_shim_real.dlclose) {
    mt_shim_self.depth++;
    mt_shim_resolve();
    mt_shim_self.depth--;
    if (!mt_shim_real.dlclose)
      return -1;
  }
  int rc = mt_shim_real.dlclose(handle);
  if (atomic_load_explicit(&mt_shim.mode, memory_order_relaxed) != MT_SHIM_OFF &&
      !mt_shim_self.depth)
    mt_modules_scan();
  return rc;
}
