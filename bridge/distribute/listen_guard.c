/* listen_guard: make TensorFlow's gRPC server listen where the cluster says.
 *
 * TensorFlow 2.21's GrpcServer asks gRPC to listen on "0.0.0.0:<port>",
 * whatever host its ServerDef names, and gRPC turns that wildcard into a
 * dual-stack socket bound to [::]:<port>: every interface of the machine.
 * No ServerDef or gRPC option changes it, so this library changes the one
 * call that decides it: the `bind` of TensorFlow's own libraries.
 *
 * tfb_guard_patch(name) rewrites the `bind` slots of the global offset
 * table of each loaded object whose file name ends with `name` (the TF
 * libraries) to point at guarded_bind; other libraries (Python's sockets,
 * Julia) keep libc's bind.  tfb_guard_set(port, ...) registers the address
 * a wildcard bind of that port must use instead; guarded_bind substitutes it
 * (an IPv4 address on gRPC's dual-stack IPv6 socket as its v4-mapped form,
 * ::ffff:a.b.c.d, which accepts IPv4 connections to that address alone) and
 * counts the substitution, so the caller can check it happened.  Binds of
 * ports without a rule, and binds of specific addresses, pass through.
 *
 * Built at run time into the bridge's cache (bridge/distribute/listen.py).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#if defined(__x86_64__)
#define JUMP_SLOT R_X86_64_JUMP_SLOT
#define GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define JUMP_SLOT R_AARCH64_JUMP_SLOT
#define GLOB_DAT R_AARCH64_GLOB_DAT
#else
#error "listen_guard knows the relocations of x86_64 and aarch64 only"
#endif

#define MAX_RULES 256
#define ANY_PORT (-1)   /* the rule of a server asking for port 0 (any free port) */

struct rule {
    int port;             /* host order; ANY_PORT: every port; 0: an unused entry */
    int family;           /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    uint32_t scope_id;
    unsigned long hits;   /* wildcard binds replaced */
    int last_errno;       /* of the last replaced bind, 0 when it succeeded */
};

static struct rule rules[MAX_RULES];
static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER;

static struct rule *find_rule(int port) {
    for (int i = 0; i < MAX_RULES; i++)
        if (rules[i].port == port) return &rules[i];
    return NULL;
}

static int is_wildcard(const struct sockaddr *addr, socklen_t len, int *port) {
    if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        *port = ntohs(a->sin_port);
        return a->sin_addr.s_addr == htonl(INADDR_ANY);
    }
    if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        *port = ntohs(a->sin6_port);
        return memcmp(&a->sin6_addr, &in6addr_any, sizeof(struct in6_addr)) == 0;
    }
    return 0;
}

static int guarded_bind(int fd, const struct sockaddr *addr, socklen_t len) {
    int port = 0;
    if (addr == NULL || !is_wildcard(addr, len, &port)) return bind(fd, addr, len);
    pthread_mutex_lock(&rules_lock);
    struct rule *r = port != 0 ? find_rule(port) : NULL;
    if (r == NULL) r = find_rule(ANY_PORT);
    int key = r != NULL ? r->port : 0;
    struct rule copy;
    if (r != NULL) copy = *r;
    pthread_mutex_unlock(&rules_lock);
    if (r == NULL) return bind(fd, addr, len);

    int result, err;
    if (addr->sa_family == AF_INET6) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (copy.family == AF_INET6) {
            memcpy(&a.sin6_addr, copy.addr, 16);
            a.sin6_scope_id = copy.scope_id;
            result = bind(fd, (struct sockaddr *)&a, sizeof a);
        } else {
            int v6only = 0;
            socklen_t optlen = sizeof v6only;
            if (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &optlen) == 0 && v6only) {
                /* An IPv6-only socket cannot take an IPv4 address: refuse it,
                 * and gRPC adds an IPv4 socket for 0.0.0.0, which comes here too. */
                errno = EADDRNOTAVAIL;
                result = -1;
            } else {
                memset(&a.sin6_addr, 0, 16);
                a.sin6_addr.s6_addr[10] = 0xff;
                a.sin6_addr.s6_addr[11] = 0xff;
                memcpy(&a.sin6_addr.s6_addr[12], copy.addr, 4);
                a.sin6_scope_id = 0;
                result = bind(fd, (struct sockaddr *)&a, sizeof a);
            }
        }
    } else {
        if (copy.family == AF_INET) {
            struct sockaddr_in a;
            memcpy(&a, addr, sizeof a);
            memcpy(&a.sin_addr, copy.addr, 4);
            result = bind(fd, (struct sockaddr *)&a, sizeof a);
        } else {
            errno = EAFNOSUPPORT;  /* an IPv4 socket cannot listen on an IPv6 address */
            result = -1;
        }
    }
    err = result == 0 ? 0 : errno;
    pthread_mutex_lock(&rules_lock);
    r = find_rule(key);
    if (r != NULL) {
        r->hits++;
        r->last_errno = err;
    }
    pthread_mutex_unlock(&rules_lock);
    errno = err;
    return result;
}

/* Register (family AF_INET or AF_INET6) or remove (family 0) the address
 * wildcard binds of `port` get (ANY_PORT: of every port without a rule of
 * its own, port 0 included).  0 on success, -1 when the table is full. */
int tfb_guard_set(int port, int family, const unsigned char *addr, unsigned scope_id) {
    int status = 0;
    pthread_mutex_lock(&rules_lock);
    struct rule *r = find_rule(port);
    if (family == 0) {
        if (r != NULL) memset(r, 0, sizeof *r);
    } else {
        if (r == NULL) r = find_rule(0);
        if (r == NULL) {
            status = -1;
        } else {
            memset(r, 0, sizeof *r);
            r->port = port;
            r->family = family;
            memcpy(r->addr, addr, family == AF_INET ? 4 : 16);
            r->scope_id = scope_id;
        }
    }
    pthread_mutex_unlock(&rules_lock);
    return status;
}

/* How many wildcard binds of `port` were replaced; *last_errno: the errno of
 * the last one (0: it succeeded).  -1 when the port has no rule. */
long tfb_guard_hits(int port, int *last_errno) {
    long hits = -1;
    pthread_mutex_lock(&rules_lock);
    struct rule *r = find_rule(port);
    if (r != NULL) {
        hits = (long)r->hits;
        *last_errno = r->last_errno;
    }
    pthread_mutex_unlock(&rules_lock);
    return hits;
}

struct patch_request {
    const char *suffix;
    int objects;   /* objects whose name matched */
    int slots;     /* slots now pointing at guarded_bind */
    int error;     /* errno of a failed mprotect */
};

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static uintptr_t dyn_ptr(uintptr_t base, uintptr_t value) {
    /* glibc relocates these entries of the loaded object's dynamic section;
     * other loaders may leave them as file addresses. */
    return value < base ? base + value : value;
}

static void patch_slot(struct dl_phdr_info *info, uintptr_t slot, struct patch_request *req) {
    if (*(void **)slot == (void *)guarded_bind) {
        req->slots++;
        return;
    }
    /* Inside PT_GNU_RELRO the slot was made read-only after relocation. */
    int relro = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_GNU_RELRO && slot >= start && slot < start + ph->p_memsz) relro = 1;
    }
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t first = slot & ~(uintptr_t)(page - 1);
    if (relro && mprotect((void *)first, (size_t)page, PROT_READ | PROT_WRITE) != 0) {
        req->error = errno;
        return;
    }
    __atomic_store_n((void **)slot, (void *)guarded_bind, __ATOMIC_SEQ_CST);
    if (relro) mprotect((void *)first, (size_t)page, PROT_READ);
    req->slots++;
}

static void patch_relocations(struct dl_phdr_info *info, const ElfW(Rela) *rel, size_t size,
                              const ElfW(Sym) *symtab, const char *strtab, struct patch_request *req) {
    for (size_t i = 0; i < size / sizeof(ElfW(Rela)); i++) {
        unsigned long type = ELF64_R_TYPE(rel[i].r_info);
        if (type != JUMP_SLOT && type != GLOB_DAT) continue;
        const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rel[i].r_info)];
        if (strcmp(strtab + sym->st_name, "bind") == 0)
            patch_slot(info, info->dlpi_addr + rel[i].r_offset, req);
    }
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct patch_request *req = data;
    if (info->dlpi_name == NULL || !ends_with(info->dlpi_name, req->suffix)) return 0;
    req->objects++;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (dyn == NULL) return 0;
    uintptr_t base = info->dlpi_addr, strtab = 0, symtab = 0, jmprel = 0, rela = 0;
    size_t pltrelsz = 0, relasz = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
            case DT_STRTAB: strtab = dyn_ptr(base, dyn->d_un.d_ptr); break;
            case DT_SYMTAB: symtab = dyn_ptr(base, dyn->d_un.d_ptr); break;
            case DT_JMPREL: jmprel = dyn_ptr(base, dyn->d_un.d_ptr); break;
            case DT_PLTRELSZ: pltrelsz = dyn->d_un.d_val; break;
            case DT_RELA: rela = dyn_ptr(base, dyn->d_un.d_ptr); break;
            case DT_RELASZ: relasz = dyn->d_un.d_val; break;
            default: break;
        }
    }
    if (strtab == 0 || symtab == 0) return 0;
    if (jmprel != 0)
        patch_relocations(info, (const ElfW(Rela) *)jmprel, pltrelsz, (const ElfW(Sym) *)symtab,
                          (const char *)strtab, req);
    if (rela != 0)
        patch_relocations(info, (const ElfW(Rela) *)rela, relasz, (const ElfW(Sym) *)symtab,
                          (const char *)strtab, req);
    return 0;
}

/* Point the `bind` slots of every loaded object whose name ends with
 * `suffix` at guarded_bind.  Returns the number of slots that do now (also
 * those patched before), or -errno when a slot could not be made writable;
 * *objects: how many objects matched. */
int tfb_guard_patch(const char *suffix, int *objects) {
    struct patch_request req = {suffix, 0, 0, 0};
    dl_iterate_phdr(patch_object, &req);
    *objects = req.objects;
    return req.error ? -req.error : req.slots;
}
