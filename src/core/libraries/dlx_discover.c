/* dlx_discover.c - a kernel library's declared kernels, as dlx.load finds them, in C. */
#include "dlx_discover.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlx_core.h"
#include "dlx_derive.h"
#include "dlx_identity.h"
#include "dlx_sig.h"

#include <sys/stat.h>
#include <unistd.h>

const dlx_kernel_record *dlx_record_of(void *handle, const char *sym) {
  const dlx_kernel_record *r = dlsym(handle, sym);
  Dl_info info;
  const ElfW(Sym) *es = NULL;
  /* a function or a 1-byte object of that name would otherwise be read past its end */
  if (!r || !dladdr1(r, &info, (void **)&es, RTLD_DL_SYMENT) || !es || !info.dli_sname ||
      strcmp(info.dli_sname, sym) != 0 || ELF64_ST_TYPE(es->st_info) != STT_OBJECT ||
      es->st_size < offsetof(dlx_kernel_record, signature)) /* an ABI 1.0 record's size */
    return NULL;
  if (r->magic != DLX_KERNEL_MAGIC || !r->fn || !r->name) return NULL;
  /* A record of another major has another layout: only its name is read (the caller
   * refuses it by ABI before anything else). */
  if (strcmp(r->name, sym + strlen(DLX_KERNEL_RECORD_PREFIX)) != 0) return NULL;
  return r;
}

typedef struct {
  void *dl;
  const char *path;
  dlx_found_library *out;
  int32_t cap;
  char *err;
  size_t errlen;
  int failed;
} discover_ctx;

static void fail(discover_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, c->errlen, fmt, ap);
  va_end(ap);
  c->failed = 1;
}

static void derive(dlx_found_kernel *k) {
  char buf[3 * DLX_SIG_MAX_LEN];
  dlx_derived *d = malloc(sizeof *d); /* ~20 KB: not on the stack */
  if (!d) {
    snprintf(k->why, sizeof k->why, "out of memory");
    return;
  }
  /* the Python path skips what it cannot derive results for, and so does this one */
  if (dlx_derive_results(k->handle.plan, d, k->why, sizeof k->why) == 0 &&
      dlx_derive_schema(k->handle.plan, k->handle.name, buf, sizeof buf, k->why,
                        sizeof k->why) == 0) {
    k->nresults = d->nresults;
    k->schema = strdup(buf);
    if (!k->schema) snprintf(k->why, sizeof k->why, "out of memory");
  }
  free(d);
}

static void collect(void *vctx, const char *sym) {
  discover_ctx *c = vctx;
  if (c->failed) return;
  const dlx_kernel_record *r = dlx_record_of(c->dl, sym);
  if (!r) return;
  /* A newer minor may read runtime fields this dlx lacks: refused too. */
  if (DLX_ABI_MAJOR(r->abi_version) != DLX_ABI_MAJOR(DLX_ABI_VERSION) ||
      DLX_ABI_MINOR(r->abi_version) > DLX_ABI_MINOR(DLX_ABI_VERSION))
    return fail(c, "kernel '%s' in %s was built for dlx ABI %u.%u, this dlx is ABI %u.%u",
                r->name, c->path, DLX_ABI_MAJOR(r->abi_version), DLX_ABI_MINOR(r->abi_version),
                DLX_ABI_MAJOR(DLX_ABI_VERSION), DLX_ABI_MINOR(DLX_ABI_VERSION));
  dlx_found_library *lib = c->out;
  if (lib->n == c->cap) {
    int32_t cap = c->cap ? 2 * c->cap : 8;
    dlx_found_kernel *grown = realloc(lib->kernels, (size_t)cap * sizeof *grown);
    if (!grown) return fail(c, "out of memory");
    lib->kernels = grown;
    c->cap = cap;
  }
  dlx_found_kernel *k = &lib->kernels[lib->n++];
  memset(k, 0, sizeof *k);
  k->handle.fn = r->fn;
  k->handle.name = r->name;
  /* The record's signature field exists from ABI 1.1 on. */
  const char *text = DLX_ABI_MINOR(r->abi_version) >= 1 ? r->signature : NULL;
  if (!text) {
    snprintf(k->why, sizeof k->why, "no declared signature");
    return;
  }
  char why[256];
  int32_t column = 0;
  dlx_sig *plan = dlx_sig_parse(text, why, sizeof why, &column);
  if (!plan)
    return fail(c, "kernel '%s' in %s: malformed signature at column %d: %s", r->name, c->path,
                (int)column, why);
  k->handle.plan = plan;
  derive(k);
}

static void ignore(void *ctx, const char *sym) {
  (void)ctx;
  (void)sym;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const dlx_found_kernel *)a)->handle.name,
                ((const dlx_found_kernel *)b)->handle.name);
}

/* The sha256 of the open file fd (st: its fstat), read once whole. 0, or -1 with err. */
static int hash_file(int fd, const struct stat *st, const char *path, char out[65], char *err,
                     size_t errlen) {
  size_t n = (size_t)st->st_size, got = 0;
  unsigned char *buf = malloc(n ? n : 1);
  if (!buf) {
    snprintf(err, errlen, "%s: no memory to read its %zu bytes", path, n);
    return -1;
  }
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      snprintf(err, errlen, "%s: read failed (%s)", path, r < 0 ? strerror(errno) : "short");
      free(buf);
      return -1;
    }
    got += (size_t)r;
  }
  dlx_digest_hex(buf, n, out);
  free(buf);
  return 0;
}

int dlx_discover(const char *path, dlx_found_library *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  /* Read the symbol table before mapping: a truncated file is refused, not mapped. */
  if (dlx_elf_each_symbol(path, DLX_KERNEL_RECORD_PREFIX, ignore, NULL, err, errlen) < 0)
    return -1;
  /* The digest is of the file dlopen maps: hashed from an open descriptor, and refused when
   * the path names another file (replaced, or rewritten) once it is mapped. */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat before, after;
  if (fd < 0 || fstat(fd, &before) != 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  int hashed = hash_file(fd, &before, path, out->sha256, err, errlen);
  close(fd);
  if (hashed != 0) return -1;
  out->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!out->dl) {
    const char *e = dlerror();
    snprintf(err, errlen, "%s", e ? e : path);
    return -1;
  }
  if (stat(path, &after) != 0 || after.st_dev != before.st_dev ||
      after.st_ino != before.st_ino || after.st_size != before.st_size ||
      after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
      after.st_mtim.tv_nsec != before.st_mtim.tv_nsec) {
    snprintf(err, errlen, "%s changed on disk while it was loaded: load it again", path);
    dlx_discover_free(out);
    return -1;
  }
  discover_ctx c = {out->dl, path, out, 0, err, errlen, 0};
  if (dlx_elf_each_symbol(path, DLX_KERNEL_RECORD_PREFIX, collect, &c, err, errlen) < 0 ||
      c.failed) {
    dlx_discover_free(out);
    return -1;
  }
  if (out->n > 1) qsort(out->kernels, (size_t)out->n, sizeof *out->kernels, by_name);
  return 0;
}

void dlx_discover_free(dlx_found_library *lib) {
  for (int32_t i = 0; i < lib->n; ++i) {
    free(lib->kernels[i].schema);
    dlx_sig_free((dlx_sig *)lib->kernels[i].handle.plan);
  }
  free(lib->kernels);
  if (lib->dl) dlclose(lib->dl);
  memset(lib, 0, sizeof *lib);
}
