/* dlx_elf.c - list a shared object's exported kernel records by reading its
 * .dynsym from disk, so `lib.kernels` needs no cooperation from the library. */
#define _POSIX_C_SOURCE 200809L
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dlx_core.h"

static int read_at(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

int dlx_elf_each_symbol(const char *path, const char *prefix,
                        void (*fn)(void *ctx, const char *name), void *ctx, char *err,
                        size_t errlen) {
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer forever. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open '%s'", path);
    return -1;
  }
  struct stat fst;
  if (fstat(fd, &fst) != 0) {
    snprintf(err, errlen, "cannot stat '%s'", path);
    close(fd);
    return -1;
  }
  if (!S_ISREG(fst.st_mode)) {
    snprintf(err, errlen, "'%s' is not a regular file (%s)", path,
             S_ISFIFO(fst.st_mode) ? "a FIFO" : S_ISDIR(fst.st_mode) ? "a folder"
             : S_ISCHR(fst.st_mode) || S_ISBLK(fst.st_mode) ? "a device"
             : S_ISSOCK(fst.st_mode) ? "a socket" : "not a plain file");
    close(fd);
    return -1;
  }
  int count = -1;
  Elf64_Shdr *sh = NULL;
  Elf64_Sym *syms = NULL;
  char *strs = NULL;
  Elf64_Ehdr eh;
  if (read_at(fd, &eh, sizeof eh, 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64) {
    snprintf(err, errlen, "'%s' is not a 64-bit ELF shared object", path);
    goto done;
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 65000) {
    snprintf(err, errlen, "'%s' has no usable section table", path);
    goto done;
  }
  if (eh.e_shoff > (uint64_t)fst.st_size ||
      (uint64_t)eh.e_shnum * sizeof *sh > (uint64_t)fst.st_size - eh.e_shoff) {
    snprintf(err, errlen, "'%s': truncated section table", path);
    goto done;
  }
  sh = calloc(eh.e_shnum, sizeof *sh);
  if (!sh || read_at(fd, sh, eh.e_shnum * sizeof *sh, eh.e_shoff)) {
    snprintf(err, errlen, "'%s': truncated section table", path);
    goto done;
  }
  const Elf64_Shdr *dynsym = NULL;
  for (unsigned i = 0; i < eh.e_shnum; ++i)
    if (sh[i].sh_type == SHT_DYNSYM) dynsym = &sh[i];
  if (!dynsym || dynsym->sh_link >= eh.e_shnum || dynsym->sh_entsize != sizeof(Elf64_Sym)) {
    snprintf(err, errlen, "'%s' exports no dynamic symbols", path);
    goto done;
  }
  const Elf64_Shdr *strtab = &sh[dynsym->sh_link];
  /* Sizes come from the file: never trust one that reaches past its end. */
  uint64_t size = (uint64_t)fst.st_size;
  if (dynsym->sh_size > size || dynsym->sh_offset > size - dynsym->sh_size ||
      strtab->sh_size > size || strtab->sh_offset > size - strtab->sh_size) {
    snprintf(err, errlen, "'%s': truncated symbol table", path);
    goto done;
  }
  size_t nsyms = dynsym->sh_size / sizeof(Elf64_Sym);
  syms = malloc(dynsym->sh_size ? dynsym->sh_size : 1);
  strs = malloc(strtab->sh_size + 1);
  if (!syms || !strs || read_at(fd, syms, dynsym->sh_size, dynsym->sh_offset) ||
      read_at(fd, strs, strtab->sh_size, strtab->sh_offset)) {
    snprintf(err, errlen, "'%s': truncated symbol table", path);
    goto done;
  }
  strs[strtab->sh_size] = '\0';
  size_t plen = strlen(prefix);
  count = 0;
  for (size_t i = 0; i < nsyms; ++i) {
    if (syms[i].st_shndx == SHN_UNDEF || syms[i].st_name >= strtab->sh_size) continue;
    /* Records are data: a function (or anything else) of that name is not one. */
    if (ELF64_ST_TYPE(syms[i].st_info) != STT_OBJECT) continue;
    const char *name = strs + syms[i].st_name;
    if (strncmp(name, prefix, plen) != 0) continue;
    fn(ctx, name);
    ++count;
  }
done:
  free(sh);
  free(syms);
  free(strs);
  close(fd);
  return count;
}
