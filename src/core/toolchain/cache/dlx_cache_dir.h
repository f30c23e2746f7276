/*
 * dlx_cache_dir.h - the cache folder: where it is, and whether what is in it may be
 * loaded (a library is code: only the user's own, unwritable-by-others files qualify).
 * The lock and atomic publishing are dlx_cache_lock.h's.
 */
#ifndef DLX_CACHE_DIR_H_
#define DLX_CACHE_DIR_H_

#include <stddef.h>

/* DLX_CACHE_DIR, else $XDG_CACHE_HOME/dlx, else $HOME/.cache/dlx. Empty strings
 * count as unset, and so does a relative XDG_CACHE_HOME (the XDG spec says to
 * ignore it). Trailing slashes of the base are dropped. 0, or -1 with err. */
int dlx_cache_dir_resolve(const char *env_dlx_cache_dir, const char *env_xdg_cache_home,
                          const char *env_home, char *out, size_t outlen, char *err,
                          size_t errlen);

/* Opens the cache folder `dir` for work by descriptor, after mkdir -p when `create`
 * (folders it creates are 0700). Refused when the folder is a symlink, not a
 * directory, not owned by the effective uid, or writable by group or others; or when
 * a folder above it could let another user replace it (as OpenSSH's StrictModes):
 * owned by neither root nor the effective uid, or writable by group or others
 * without the sticky bit (/tmp, mode 1777, is fine). Each folder from / down is
 * opened without following links and checked through its descriptor. Returns an
 * O_DIRECTORY descriptor (close-on-exec), or -1 with err naming the folder. */
int dlx_cache_dir_open(const char *dir, int create, char *err, size_t errlen);

/* dlx_cache_dir_open(dir, 1, ...) and close: 0, or -1 with err. */
int dlx_cache_dir_ensure(const char *dir, char *err, size_t errlen);

/* Opens `name` (a plain file name) in the folder `dirfd` for loading, without
 * following a symlink, and checks through that descriptor: a regular file, owned by
 * geteuid(), not group/other writable, an ELF file, carrying a valid seal
 * (dlx_seal.h). 1 with *fd_out (read-only, close-on-exec) when trusted; 0 when
 * missing; -1 refused, with the reason in err. Load it through dlx_fd_path(*fd_out),
 * not by name (dlx_cache_dlopen): the bytes loaded are then the bytes checked,
 * whatever happens to the name meanwhile. Keep the descriptor open while the library is loaded: the dynamic
 * loader knows a library by the name it was opened with, and a reused descriptor
 * number must not look like an already-loaded library. */
int dlx_cache_open_trusted(int dirfd, const char *name, int *fd_out, char *err, size_t errlen);

/* "/proc/self/fd/<fd>": a name dlopen opens as that very descriptor's file. 0, or -1
 * when it does not fit. */
int dlx_fd_path(int fd, char *out, size_t outlen);

/* dlopen(dlx_fd_path(*fd), flags): the library open as *fd, whatever its name now
 * points to. When the loader already knows a library by that name (loaded through the
 * same descriptor number, since closed and reused, or the same file reached through
 * it, which adds the name to that library's), *fd is first moved to a number whose name
 * is free (the old one closed), however many are taken. The name is asked about with a
 * folder briefly behind *fd, so that only names count, not files. NULL with err
 * (dlerror's words, or no free number below the descriptor limit). */
void *dlx_cache_dlopen(int *fd, int flags, char *err, size_t errlen);

/* 1 trusted, 0 missing, -1 refused with the reason in err. Trusted: not a symlink
 * (never followed), a regular file, owned by geteuid(), not group/other writable,
 * at least 64 bytes and starting with the ELF magic. Deeper corruption is the
 * loader's to find. */
int dlx_cache_file_trusted(const char *path, char *err, size_t errlen);

#endif /* DLX_CACHE_DIR_H_ */
