/*
 * dlx_fork.h - what a fork() must not carry into the child: the one place dlx handles
 * fork (pthread_atfork, registered on first use).
 *
 * A thread inside dlx may hold, while another thread forks (multiprocessing's "fork"):
 * a build lock (flock on an open file description the child would share: were the parent
 * then killed, the child, which never knew it held the lock, would keep it, and every
 * later build of that file would wait), and the write end of a compiler's output or
 * exec-report pipe (the builder reads to end of file: a child holding a copy would keep it
 * reading forever). Such descriptors are opened, registered and closed here under one
 * mutex that fork's prepare handler takes, so no fork falls between an open and its
 * registration; the child closes every registered descriptor, which leaves the parent's
 * lock and pipes as they were. dlx's own fork for a compiler keeps them (it needs its
 * pipe ends; exec closes the rest, all close-on-exec).
 */
#ifndef DLX_FORK_H_
#define DLX_FORK_H_

#include <sys/types.h>

/* open(2) with O_CLOEXEC added; the descriptor is closed in forked children. */
int dlx_fork_open(const char *path, int flags, mode_t mode);
/* pipe2(fds, O_CLOEXEC); both ends are closed in forked children. 0, or -1 with errno. */
int dlx_fork_pipe(int fds[2]);
/* Closes a descriptor from dlx_fork_open or dlx_fork_pipe (others: plain close). */
int dlx_fork_close(int fd);
/* dlx's own fork (a compiler): the child keeps every descriptor (exec closes them). */
pid_t dlx_fork_own(void);
/* How many descriptors are registered now (tests). */
int dlx_fork_registered(void);

#endif /* DLX_FORK_H_ */
