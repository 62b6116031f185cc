/* Embeds Julia 1.5 the way libtfjl_julia.so does, without the bridge:
 * jl_init_with_image on a pthread with a 64 MB stack, then Julia code on it.
 * Run under glibc's heap checker to see its incompatibility with Julia
 * (docs/internals/kernels-cpp.md, "glibc's heap checker"):
 *
 *   cc -o embed_julia embed_julia.c -I/usr/include/julia -ljulia -lpthread -ldl
 *   LD_PRELOAD=libc_malloc_debug.so.0 MALLOC_CHECK_=3 ./embed_julia addresses
 *   LD_PRELOAD=libc_malloc_debug.so.0 MALLOC_CHECK_=3 ./embed_julia timers
 *
 * "addresses" prints the malloc that this program (and libjulia) call, and
 * the one Julia's ccall(:malloc) finds by dlsym.  "timers" runs sleep(0)
 * 2,000 times (each is a Timer: its uv handle comes from ccall(:malloc),
 * libjulia's jl_uv_closeHandle free()s it), then "alternating" does the
 * same with a pair of ccall(:malloc) in Julia and free() in C.  Exit status
 * 0 when all went through.  SIGABRT is left at its default action, so that
 * glibc's abort ends the process instead of deadlocking in Julia's handler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <julia.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef JULIA_BINDIR
#define JULIA_BINDIR "/usr/bin"
#endif
#ifndef JULIA_IMAGE
#define JULIA_IMAGE "/usr/lib/x86_64-linux-gnu/julia/sys.so"
#endif

static const char *mode = "timers";
static int status = 1;

static int eval_ok(const char *code) {
    jl_eval_string(code);
    if (jl_exception_occurred()) {
        fprintf(stderr, "Julia error in: %s\n", code);
        jl_exception_clear();
        return 0;
    }
    return 1;
}

static void *julia_main(void *unused) {
    (void)unused;
    jl_init_with_image(JULIA_BINDIR, JULIA_IMAGE);
    signal(SIGABRT, SIG_DFL);
    if (strcmp(mode, "addresses") == 0) {
        void *(*linked)(size_t) = malloc;
        void *by_dlsym = dlsym(RTLD_DEFAULT, "malloc");
        void *by_main_handle = dlsym(dlopen(NULL, RTLD_LAZY), "malloc");
        jl_value_t *v = jl_eval_string("UInt(cglobal(:malloc))");
        Dl_info a, b, c;
        dladdr((void *)linked, &a);
        dladdr(by_dlsym, &b);
        dladdr((void *)jl_unbox_uint64(v), &c);
        printf("malloc called by C code (PLT):        %p  %s\n", (void *)linked, a.dli_fname);
        printf("dlsym(RTLD_DEFAULT, \"malloc\"):        %p  %s\n", by_dlsym, b.dli_fname);
        printf("dlsym(dlopen(NULL), \"malloc\"):        %p\n", by_main_handle);
        printf("Julia's ccall(:malloc) / cglobal:     %p  %s\n", (void *)jl_unbox_uint64(v), c.dli_fname);
        status = 0;
    } else if (strcmp(mode, "timers") == 0) {
        if (eval_ok("for i in 1:2000; sleep(0); end")) {
            printf("timers: 2000 sleep(0) done\n");
            status = 0;
        }
    } else if (strcmp(mode, "alternating") == 0) {
        jl_value_t *f = jl_eval_string("() -> UInt(Libc.malloc(200))");
        for (int i = 0; i < 2000; i++)
            free((void *)jl_unbox_uint64(jl_call0(f)));
        printf("alternating: 2000 Libc.malloc + free done\n");
        status = 0;
    }
    fflush(stdout);
    jl_atexit_hook(status);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) mode = argv[1];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64u << 20);
    pthread_t t;
    if (pthread_create(&t, &attr, julia_main, NULL) != 0) return 2;
    pthread_join(t, NULL);
    return status;
}
