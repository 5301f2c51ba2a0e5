/* plugin.c - optional shared libraries (plugin.h). */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/plugin.h"

/* The directory of the running executable, from /proc/self/exe; "" if unknown. */
static void exe_dir(char *dir, size_t len) {
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    dir[0] = '\0';
    if (n <= 0) return;
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(dir, len, "%s", path);
}

void *titan_plugin_open(const titan_plugin *p) {
    const char *env = getenv(p->env);
    if (env && *env) {
        void *h = dlopen(env, p->flags);
        if (!h) titan_error(TITAN_ERR_USAGE, "%s: %s=%s: %s", p->what, p->env, env, dlerror());
        return h;
    }
    char dir[PATH_MAX], cand[2][PATH_MAX + 64];
    exe_dir(dir, sizeof dir);
    if (dir[0]) {
        snprintf(cand[0], sizeof cand[0], "%s/%s", dir, p->file);
        snprintf(cand[1], sizeof cand[1], "%s/../lib/titan/%s", dir, p->file);
        for (int i = 0; i < 2; i++) {
            if (access(cand[i], F_OK) != 0) continue;
            void *h = dlopen(cand[i], p->flags);
            /* it exists but does not load: usually a runtime library missing here */
            if (!h) titan_error(TITAN_ERR_USAGE, "%s: %s", p->what, dlerror());
            return h;
        }
    }
    void *h = dlopen(p->file, p->flags);
    if (!h) {
        titan_error(TITAN_ERR_USAGE, "%s: this titan has no %s (%s is not in %s, %s/../lib/titan or the "
                    "library path)", p->what, p->missing, p->file,
                    dir[0] ? dir : "the executable's directory", dir);
        titan_error_hint("%s", p->hint);
    }
    return h;
}
