// Finding Julia (for a lazy start) and the Julia side of the runtime.
#include <dlfcn.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "julia_side.h"
#include "julia_thread.h"

extern char** environ;

namespace tfjl {
namespace detail {
namespace {

bool is_dir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

// Runs `julia` (TFBRIDGE_JULIA or the one on PATH) to learn its bindir and
// sysimage, as bridge.julia.runtime does.  posix_spawn: no shell quoting,
// and safe in a process full of TensorFlow threads.
std::string ask_julia(InitParams* params) {
  const char* exe = env("TFBRIDGE_JULIA");
  if (exe == nullptr) exe = "julia";
  int fds[2];
  if (pipe(fds) != 0) return std::string("pipe failed: ") + std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  const char* argv[] = {exe, "--startup-file=no", "--history-file=no", "-e",
                        "print(Sys.BINDIR, '\\n', unsafe_string(Base.JLOptions().image_file))", nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, exe, &actions, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return std::string("could not run '") + exe + "' to locate Julia (" + std::strerror(rc) +
           "): put julia on PATH, set TFBRIDGE_JULIA to the executable, or set TFBRIDGE_JULIA_BINDIR "
           "and TFBRIDGE_JULIA_IMAGE";
  }
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const size_t nl = out.find('\n');
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || nl == std::string::npos) {
    return std::string("'") + exe + "' did not report its bindir and sysimage (output: '" + out + "')";
  }
  params->bindir = out.substr(0, nl);
  params->image = out.substr(nl + 1);
  return "";
}

}  // namespace

std::string check_params(const InitParams& params) {
  if (!is_dir(params.bindir)) {
    return "Julia's bindir '" + params.bindir + "' is not a folder (expected Sys.BINDIR of the Julia installation)";
  }
  if (!is_file(params.image)) {
    return "Julia's system image '" + params.image + "' does not exist (expected the sys.so that `julia` reports)";
  }
  if (!params.bridge_jl.empty() && !is_file(params.bridge_jl)) {
    return "TFBridge.jl not found at '" + params.bridge_jl + "'";
  }
  return "";
}

std::string params_from_environment(InitParams* params) {
  const char* bindir = env("TFBRIDGE_JULIA_BINDIR");
  const char* image = env("TFBRIDGE_JULIA_IMAGE");
  if (bindir != nullptr && image != nullptr) {
    params->bindir = bindir;
    params->image = image;
  } else if (std::string err = ask_julia(params); !err.empty()) {
    return err;
  }
  if (const char* bridge_jl = env("TFBRIDGE_JULIA_BRIDGE_JL")) params->bridge_jl = bridge_jl;
  return "";
}

std::string load_julia_side(const JuliaSide** side) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&load_julia_side), &info) == 0 || info.dli_fname == nullptr) {
    return "could not locate libtfjl_runtime.so (dladdr failed)";
  }
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  path = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + TFJL_JULIA_LIBRARY_NAME;
  // RTLD_LOCAL, by itself: see julia_side.h for why this library is separate.
  // The handle is kept on purpose: Julia is never unloaded.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return "could not load " + path + ": " + (why ? why : "unknown error");
  }
  auto entry = reinterpret_cast<const JuliaSide* (*)()>(dlsym(handle, TFJL_JULIA_SIDE_SYMBOL));
  const JuliaSide* table = entry != nullptr ? entry() : nullptr;
  if (table == nullptr || table->abi != kJuliaSideAbi) {
    return path + " does not match libtfjl_runtime.so (rebuild the runtime: both come from one build)";
  }
  *side = table;
  return "";
}

}  // namespace detail
}  // namespace tfjl
