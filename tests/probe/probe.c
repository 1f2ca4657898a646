/* probe: a static test program that end-to-end and engine tests put inside
 * container images. Each subcommand prints simple key=value lines.
 *
 *   probe id               uid= gid= groups=
 *   probe env              env=K=V per variable
 *   probe cwd              cwd=
 *   probe mounts           /proc/self/mountinfo as is
 *   probe hostname         hostname=
 *   probe pid              pid= ppid=
 *   probe write PATH TEXT  writes TEXT to PATH; wrote=PATH or error=...
 *   probe cat PATH         the file's bytes ("-": stdin's)
 *   probe readlink PATH    link=<the symlink's text>
 *   probe exit N           exits with status N
 *   probe raise N          kills itself with signal N
 *   probe signals SECONDS  ready, then signal=N per signal; exit 0 after the
 *                          timeout, 128+15 on SIGTERM
 *   probe ls DIR           name=... per entry, sorted by the kernel's order
 *   probe walk DIR         stats every file below DIR: files=N
 *   probe zombies          orphans a child that exits, waits: zombies=N
 *   probe remount PATH     tries to remount PATH read-write: remounted=PATH
 *                          or error=...
 *   probe tty              tty=0|1 foreground=0|1 (stdin is a terminal whose
 *                          foreground process group is ours)
 *   probe rootops PATH     what a package manager tries as root: setgroups,
 *                          setresgid, setresuid, setuid (to 42), chown PATH
 *                          42:42, mknod of a character device at PATH.dev and
 *                          of a FIFO at PATH.fifo; NAME=ok or NAME=<errno
 *                          name> each, then uid= gid= and owner= (PATH's
 *                          uid:gid) dev= fifo= (each made: 1 or 0)
 *   probe true             exits 0
 * Errors: error=<what>: <strerror> on stderr, exit 1. */
/* A feature-test macro: POSIX reserves the name for programs to define, which the check does
 * not allow for. */
#define _GNU_SOURCE /* NOLINT(bugprone-reserved-identifier) */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static int fail(const char* what, const char* path) {
  fprintf(stderr, "error=%s %s: %s\n", what, path, strerror(errno));
  return 1;
}

static int cmd_id(void) {
  gid_t groups[256];
  int n = getgroups(256, groups);
  printf("uid=%u\ngid=%u\ngroups=", (unsigned)getuid(), (unsigned)getgid());
  for (int i = 0; i < n; i++) printf("%s%u", i ? "," : "", (unsigned)groups[i]);
  printf("\n");
  return 0;
}

static int cmd_cat(const char* path) {
  int fd = strcmp(path, "-") == 0 ? dup(0) : open(path, O_RDONLY);
  if (fd < 0) return fail("open", path);
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) fwrite(buf, 1, (size_t)n, stdout);
  close(fd);
  return n < 0 ? fail("read", path) : 0;
}

static int cmd_write(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return fail("open", path);
  size_t len = strlen(text);
  if (write(fd, text, len) != (ssize_t)len) return fail("write", path);
  if (close(fd) != 0) return fail("close", path);
  printf("wrote=%s\n", path);
  return 0;
}

static volatile sig_atomic_t g_sig;

static void on_signal(int sig) {
  g_sig = sig;
}

static int cmd_signals(int seconds) {
  int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
  printf("ready\n");
  fflush(stdout);
  struct timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  end.tv_sec += seconds;
  for (;;) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
      return 0;
    struct timespec tick = {0, 10L * 1000 * 1000};
    nanosleep(&tick, NULL);
    int sig = g_sig;
    if (sig == 0) continue;
    g_sig = 0;
    printf("signal=%d\n", sig);
    fflush(stdout);
    if (sig == SIGTERM) return 128 + SIGTERM;
  }
}

static int cmd_ls(const char* path) {
  DIR* d = opendir(path);
  if (d == NULL) return fail("opendir", path);
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) printf("name=%s\n", e->d_name);
  }
  closedir(d);
  return 0;
}

static long walk(int dirfd) {
  DIR* d = fdopendir(dirfd);
  if (d == NULL) return 0;
  long count = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    struct stat st;
    if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    count++;
    if (S_ISDIR(st.st_mode)) {
      int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      if (sub >= 0) count += walk(sub);
    }
  }
  closedir(d);
  return count;
}

static int cmd_walk(const char* path) {
  int fd = open(path, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return fail("open", path);
  printf("files=%ld\n", walk(fd));
  return 0;
}

/* Leaves an orphan that exits at once, then counts zombies in /proc: an
 * init that reaps leaves none. */
static int cmd_zombies(void) {
  pid_t child = fork();
  if (child < 0) return fail("fork", "child");
  if (child == 0) {
    if (fork() == 0) {
      usleep(20000);
      _exit(0);
    }
    _exit(0);
  }
  waitpid(child, NULL, 0);
  usleep(200000);
  int zombies = 0;
  DIR* d = opendir("/proc");
  if (d == NULL) return fail("opendir", "/proc");
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    char* paren = strrchr(buf, ')');
    if (paren && paren[1] == ' ' && paren[2] == 'Z') zombies++;
  }
  closedir(d);
  printf("zombies=%d\n", zombies);
  return 0;
}

static const char* outcome(int rc) {
  if (rc == 0) return "ok";
  switch (errno) {
    case EPERM:
      return "EPERM";
    case EINVAL:
      return "EINVAL";
    case EACCES:
      return "EACCES";
    default:
      return strerror(errno);
  }
}

static int cmd_rootops(const char* path) {
  char dev[4096], fifo[4096];
  snprintf(dev, sizeof dev, "%s.dev", path);
  snprintf(fifo, sizeof fifo, "%s.fifo", path);
  gid_t groups[1] = {42};
  /* Each line is printed before the next call: the set*id calls may change who runs. */
  printf("setgroups=%s\n", outcome(setgroups(1, groups)));
  printf("setresgid=%s\n", outcome(setresgid(42, 42, 42)));
  printf("setresuid=%s\n", outcome(setresuid(42, 42, 42)));
  printf("setuid=%s\n", outcome(setuid(42)));
  printf("chown=%s\n", outcome(chown(path, 42, 42)));
  printf("mknod_chr=%s\n", outcome(mknod(dev, S_IFCHR | 0666, makedev(1, 3))));
  printf("mknod_fifo=%s\n", outcome(mknod(fifo, S_IFIFO | 0644, 0)));
  struct stat st;
  if (stat(path, &st) != 0) return fail("stat", path);
  printf("uid=%u\ngid=%u\nowner=%u:%u\n", (unsigned)getuid(), (unsigned)getgid(),
         (unsigned)st.st_uid, (unsigned)st.st_gid);
  printf("dev=%d\nfifo=%d\n", lstat(dev, &st) == 0, lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: probe "
            "id|env|cwd|mounts|hostname|pid|write|cat|readlink|exit|raise|signals|ls|walk|zombies|"
            "remount|tty|rootops|true\n");
    return 2;
  }
  const char* cmd = argv[1];
  if (!strcmp(cmd, "true")) return 0;
  if (!strcmp(cmd, "id")) return cmd_id();
  if (!strcmp(cmd, "env")) {
    for (char** e = environ; *e; e++) printf("env=%s\n", *e);
    return 0;
  }
  if (!strcmp(cmd, "cwd")) {
    char buf[4096];
    if (getcwd(buf, sizeof buf) == NULL) return fail("getcwd", "");
    printf("cwd=%s\n", buf);
    return 0;
  }
  if (!strcmp(cmd, "mounts")) return cmd_cat("/proc/self/mountinfo");
  if (!strcmp(cmd, "hostname")) {
    char buf[256];
    if (gethostname(buf, sizeof buf) != 0) return fail("gethostname", "");
    printf("hostname=%s\n", buf);
    return 0;
  }
  if (!strcmp(cmd, "pid")) {
    printf("pid=%d\nppid=%d\n", (int)getpid(), (int)getppid());
    return 0;
  }
  if (!strcmp(cmd, "zombies")) return cmd_zombies();
  if (!strcmp(cmd, "tty")) {
    int tty = isatty(0);
    const char* name = tty ? ttyname(0) : NULL; /* what `tty` prints: found in /dev/pts */
    printf("tty=%d\nforeground=%d\nttyname=%s\n", tty, tty && tcgetpgrp(0) == getpgrp(),
           name ? name : "");
    return 0;
  }
  if (argc < 3) {
    fprintf(stderr, "probe %s: missing argument\n", cmd);
    return 2;
  }
  if (!strcmp(cmd, "exit")) return atoi(argv[2]);
  if (!strcmp(cmd, "raise")) {
    signal(atoi(argv[2]), SIG_DFL);
    kill(getpid(), atoi(argv[2]));
    return 1;
  }
  if (!strcmp(cmd, "cat")) return cmd_cat(argv[2]);
  if (!strcmp(cmd, "readlink")) {
    char buf[4096];
    ssize_t n = readlink(argv[2], buf, sizeof buf - 1);
    if (n < 0) return fail("readlink", argv[2]);
    buf[n] = '\0';
    printf("link=%s\n", buf);
    return 0;
  }
  if (!strcmp(cmd, "signals")) return cmd_signals(atoi(argv[2]));
  if (!strcmp(cmd, "ls")) return cmd_ls(argv[2]);
  if (!strcmp(cmd, "walk")) return cmd_walk(argv[2]);
  if (!strcmp(cmd, "rootops")) return cmd_rootops(argv[2]);
  if (!strcmp(cmd, "remount")) {
    if (mount(NULL, argv[2], NULL, MS_REMOUNT | MS_BIND, NULL) != 0)
      return fail("remount", argv[2]);
    printf("remounted=%s\n", argv[2]);
    return 0;
  }
  if (!strcmp(cmd, "write")) {
    if (argc < 4) {
      fprintf(stderr, "probe write: missing TEXT\n");
      return 2;
    }
    return cmd_write(argv[2], argv[3]);
  }
  fprintf(stderr, "probe: unknown command %s\n", cmd);
  return 2;
}
