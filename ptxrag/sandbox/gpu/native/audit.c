/* ptxrag's rtld audit library for the candidate process (LD_AUDIT).
 *
 * Every shared object the process tries to load is matched against PTXRAG_AUDIT_FORBID (a colon-separated
 * list of name fragments such as "libcublas"): a match is refused (the dynamic loader reports "not found")
 * and written to the file PTXRAG_AUDIT_LOG, which the runner reads after each call. A library built from
 * names at run time, opened by dlopen or by a dependency, is refused the same way as one named in the
 * source. A path is matched as given and as resolved (realpath): a symbolic link with an innocent name
 * (/tmp/x.so -> .../libcublas.so.13) used to pass. A copy or a hard link under another name still passes
 * (docs/sandbox.md, row 7). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char forbid[4096];
static int log_fd = -1;

unsigned int la_version(unsigned int version) {
  const char *f = getenv("PTXRAG_AUDIT_FORBID");
  const char *p = getenv("PTXRAG_AUDIT_LOG");
  if (f) {
    strncpy(forbid, f, sizeof forbid - 1);
  }
  if (p) log_fd = open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  return version < LAV_CURRENT ? version : LAV_CURRENT;
}

static const char *forbidden_in(const char *name) {
  static char frag[256];
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  const char *s = forbid;
  while (*s) {
    const char *e = strchr(s, ':');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n > 0 && n < sizeof frag) {
      memcpy(frag, s, n);
      frag[n] = 0;
      if (strstr(base, frag)) return frag;
    }
    if (!e) break;
    s = e + 1;
  }
  return NULL;
}

/* the forbidden fragment in ``name`` or, for a path, in the file it resolves to; NULL when none */
static const char *forbidden_fragment(const char *name) {
  const char *hit = forbidden_in(name);
  if (hit || !strchr(name, '/')) return hit;
  char resolved[PATH_MAX];
  if (realpath(name, resolved)) return forbidden_in(resolved);
  return NULL;
}

static void log_line(const char *what, const char *name) {
  if (log_fd < 0) return;
  char line[1024];
  size_t n = 0;
  const char *parts[] = {what, " ", name, "\n"};
  for (int i = 0; i < 4; i++) {
    size_t k = strlen(parts[i]);
    if (n + k >= sizeof line) k = sizeof line - 1 - n;
    memcpy(line + n, parts[i], k);
    n += k;
  }
  ssize_t w = write(log_fd, line, n);
  (void)w;
}

char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag) {
  (void)cookie;
  (void)flag;
  if (forbidden_fragment(name)) {
    log_line("refused", name);
    return NULL;
  }
  return (char *)name;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie) {
  (void)lmid;
  (void)cookie;
  if (map->l_name && map->l_name[0] && forbidden_fragment(map->l_name)) log_line("mapped", map->l_name);
  return 0;
}
