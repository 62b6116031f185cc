// Initialising Julia on Julia's thread, loading TFBridge.jl and the cached
// handles (part of libtfjl_julia.so).
#include <dlfcn.h>
#include <signal.h>

#include <mutex>
#include <string>

#include "julia_handles.h"
#include "julia_side.h"
#include "signals.h"

extern "C" const char tfjl_embedded_bridge_source[];  // generated from julia/TFBridge.jl and contract.jl

namespace tfjl {
namespace detail {
namespace {

Handles g_handles;

// The sysimage resolves jl_* through the global namespace, so libjulia must
// be RTLD_GLOBAL.  Unless Python loaded it so first, libjulia arrived as a
// dependency of this library, which the runtime opens RTLD_LOCAL: promote it
// (RTLD_NOLOAD only changes the flags of the copy already loaded).
std::string promote_libjulia() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&jl_is_initialized), &info) == 0 || info.dli_fname == nullptr) {
    return "could not locate the loaded libjulia (dladdr failed)";
  }
  // The handle is kept on purpose: libjulia must never be unloaded.
  if (dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) == nullptr) {
    const char* why = dlerror();
    return std::string("could not make ") + info.dli_fname + " global: " + (why ? why : "unknown error");
  }
  return "";
}

jl_value_t* lookup(jl_module_t* m, const char* name, std::string* missing) {
  jl_value_t* v = jl_get_global(m, jl_symbol(name));
  if (v == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return v;
}

// A system image built with TFBridge in it (bridge/julia/sysimage.py) has
// Main.TFBridge already, its __init__ run as the image started: including
// TFBridge.jl again would only define the same module a second time, slowly.
bool image_has_bridge() {
  jl_value_t* v = jl_get_global(jl_main_module, jl_symbol("TFBridge"));
  return v != nullptr && jl_is_module(v);
}

std::string load_bridge_module(const InitParams& params) {
  if (image_has_bridge()) return load_handles();
  jl_value_t* result = nullptr;
  if (!params.bridge_jl.empty()) {
    jl_function_t* include = jl_get_function(jl_base_module, "include");
    jl_value_t* path = jl_cstr_to_string(params.bridge_jl.c_str());
    JL_GC_PUSH1(&path);
    result = jl_call2(include, reinterpret_cast<jl_value_t*>(jl_main_module), path);
    JL_GC_POP();
  } else {
    jl_function_t* include_string = jl_get_function(jl_base_module, "include_string");
    jl_value_t* source = nullptr;
    jl_value_t* name = nullptr;
    JL_GC_PUSH2(&source, &name);
    source = jl_cstr_to_string(tfjl_embedded_bridge_source);
    name = jl_cstr_to_string("TFBridge.jl (built into libtfjl_julia.so)");
    result = jl_call3(include_string, reinterpret_cast<jl_value_t*>(jl_main_module), source, name);
    JL_GC_POP();
  }
  if (result == nullptr) {
    std::string what = describe_exception(jl_exception_occurred());
    jl_exception_clear();
    return "loading TFBridge.jl" + (params.bridge_jl.empty() ? std::string() : " (" + params.bridge_jl + ")") +
           " failed: " + what;
  }
  return load_handles();
}

}  // namespace

Handles& handles() { return g_handles; }

void keep_forever(jl_value_t* v) {
  if (v != nullptr) jl_array_ptr_1d_push(g_handles.roots, v);
}

std::string initialise_julia(const InitParams& params) {
  if (std::string err = promote_libjulia(); !err.empty()) return err;
  // Julia installs a SIGINT handler of its own; in an embedding process the
  // host (Python's KeyboardInterrupt) keeps Ctrl-C.  Julia's other handlers
  // (SIGSEGV for stack overflow and GC safepoints, ...) stay.
  struct sigaction host_sigint;
  sigaction(SIGINT, nullptr, &host_sigint);
  // Julia's threads, each of which serves calls.  Julia 1.5 reads
  // jl_options.nthreads before JULIA_NUM_THREADS, so the environment, which
  // other threads may be reading, is left alone (and it caps the count at
  // the number of CPUs).
  jl_options.nthreads = params.servers;
  jl_init_with_image(params.bindir.c_str(), params.image.c_str());
  sigaction(SIGINT, &host_sigint, nullptr);
  if (!jl_is_initialized()) return "jl_init_with_image(" + params.bindir + ", " + params.image + ") failed";
  // A crash must end the process, and a stack overflow on this thread be
  // named so (signals.cc); this thread's root task is the one to fix.
  install_signal_guards();
  return load_bridge_module(params);
}

std::string load_handles() {
  Handles& h = g_handles;
  std::string missing;
  jl_value_t* module = lookup(jl_main_module, "TFBridge", &missing);
  if (module == nullptr || !jl_is_module(module)) return "TFBridge.jl did not define module Main.TFBridge";
  h.tfbridge = reinterpret_cast<jl_module_t*>(module);
  jl_module_t* m = h.tfbridge;
  jl_value_t* roots = lookup(m, "ROOTS", &missing);
  h.protect = lookup(m, "protect", &missing);
  h.protect_value = lookup(m, "protect_value", &missing);
  h.eval_code = lookup(m, "eval_code", &missing);
  h.eval_repr = lookup(m, "eval_repr", &missing);
  h.include_file = lookup(m, "include_file", &missing);
  h.dynamic_result = lookup(m, "dynamic_result", &missing);
  h.store_dynamic = lookup(m, "store_dynamic!", &missing);
  h.function_not_found = lookup(m, "function_not_found", &missing);
  h.dynamic_output = reinterpret_cast<jl_datatype_t*>(lookup(m, "DynamicOutput", &missing));
  h.view_type = lookup(m, "view_type", &missing);
  h.readonly_type = lookup(m, "readonly_type", &missing);
  h.dims_tuple_type = lookup(m, "dims_tuple_type", &missing);
  h.failure = reinterpret_cast<jl_datatype_t*>(lookup(m, "Failure", &missing));
  h.py_repr = reinterpret_cast<jl_datatype_t*>(lookup(m, "PyRepr", &missing));
  h.py_bigint = reinterpret_cast<jl_datatype_t*>(lookup(m, "PyBigInt", &missing));
  h.py_array = reinterpret_cast<jl_datatype_t*>(lookup(m, "PyArray", &missing));
  jl_value_t* last_failures = lookup(m, "LAST_FAILURE", &missing);
  jl_value_t* dtypes = lookup(m, "DTYPES", &missing);
  h.serve_on_threads = lookup(m, "serve_on_threads", &missing);
  jl_value_t* init_error = lookup(m, "INIT_ERROR", &missing);
  if (!missing.empty()) return "TFBridge.jl lacks: " + missing;
  // TFBridge.__init__ keeps its failure rather than throwing it (TFBridge.jl).
  if (!jl_is_array(init_error)) return "TFBridge.INIT_ERROR is not a Vector{String}";
  auto* init_errors = reinterpret_cast<jl_array_t*>(init_error);
  if (jl_array_len(init_errors) > 0) {
    jl_value_t* why = jl_array_ptr_ref(init_errors, 0);
    return "TFBridge.__init__ failed: " +
           (jl_is_string(why) ? std::string(jl_string_data(why), jl_string_len(why)) : std::string("?"));
  }
  if (!jl_is_array(roots)) return "TFBridge.ROOTS is not a Vector{Any}";
  h.roots = reinterpret_cast<jl_array_t*>(roots);
  if (!jl_is_array(last_failures)) return "TFBridge.LAST_FAILURE is not a Vector{Any}";
  h.last_failures = reinterpret_cast<jl_array_t*>(last_failures);
  // Julia's element type of each dtype (contract.jl, generated beside contract.h),
  // each as big as TF's elements where those are plain memory.
  if (!jl_is_tuple(dtypes) || jl_nfields(dtypes) != kNumDTypes) {
    return "TFBridge.DTYPES does not hold the " + std::to_string(kNumDTypes) + " element types of tfjl/contract.h";
  }
  for (int d = 0; d < kNumDTypes; ++d) {
    jl_value_t* t = jl_get_nth_field(dtypes, d);
    const size_t size = DTypeSize(static_cast<DType>(d));
    if (!jl_is_datatype(t) || (size != 0 && jl_datatype_size(t) != size)) {
      return "TFBridge.DTYPES[" + std::to_string(d + 1) + "] is not a " + std::to_string(size) +
             "-byte element type as tfjl/contract.h says";
    }
    h.element_types[d] = t;  // a constant of the module: kept alive by it
  }

  // Constant bindings of the module keep the functions and types alive; the
  // ones built here are rooted explicitly.
  h.empty_string = jl_pchar_to_string("", 0);
  keep_forever(h.empty_string);
  return "";
}

jl_value_t* element_type(DType dtype) {
  const int d = static_cast<int>(dtype);
  return d >= 0 && d < kNumDTypes ? g_handles.element_types[d] : nullptr;
}

namespace {

// The type caches fill from any Julia thread.  A filled slot is read without
// a lock; an empty one is filled once, under this lock, which a thread waits
// for GC-safe: the thread holding it allocates, and a collection it starts
// must not wait for a thread blocked here.
std::mutex g_type_cache_mutex;

template <class T, class Build>
T* cached(T*& slot, Build build) {
  if (T* t = __atomic_load_n(&slot, __ATOMIC_ACQUIRE)) return t;
  jl_ptls_t ptls = current_ptls();
  T* t = nullptr;
  jl_value_t* thrown = nullptr;
  JL_GC_PUSH1(&thrown);
  {
    const int8_t state = jl_gc_safe_enter(ptls);
    std::lock_guard<std::mutex> lock(g_type_cache_mutex);
    jl_gc_safe_leave(ptls, state);
    t = slot;
    if (t == nullptr) {
      // A Julia exception (out of memory) must not leave the lock held for
      // good: it is caught here and thrown again once the lock is released,
      // for the call's julia_guarded (invoke.h) to report.
      JL_TRY {
        t = build();
        if (t != nullptr) {
          keep_forever(reinterpret_cast<jl_value_t*>(t));
          __atomic_store_n(&slot, t, __ATOMIC_RELEASE);
        }
      }
      JL_CATCH {
        t = nullptr;
        thrown = jl_current_exception();
      }
    }
  }
  if (thrown != nullptr) jl_throw(thrown);
  JL_GC_POP();
  return t;
}

// A type TFBridge builds for (dtype, rank[, input]).
jl_value_t* julia_built_type(jl_value_t*& slot, jl_function_t* builder, DType dtype, int rank, int input) {
  return cached(slot, [&]() -> jl_value_t* {
    jl_value_t* n = jl_box_int64(rank);
    JL_GC_PUSH1(&n);
    jl_value_t* t = input < 0 ? jl_call2(builder, element_type(dtype), n)
                              : jl_call3(builder, element_type(dtype), n, input ? jl_true : jl_false);
    JL_GC_POP();
    if (t == nullptr) jl_exception_clear();
    return t;
  });
}

}  // namespace

jl_value_t* array_type(DType dtype, int rank) {
  return cached(g_handles.array_types[static_cast<int>(dtype)][rank], [&] {
    return jl_apply_array_type(element_type(dtype), static_cast<size_t>(rank));
  });
}

jl_value_t* view_type(DType dtype, int rank, bool input) {
  const int d = static_cast<int>(dtype);
  jl_value_t*& slot = input ? g_handles.input_view_types[d][rank] : g_handles.view_types[d][rank];
  return julia_built_type(slot, g_handles.view_type, dtype, rank, input ? 1 : 0);
}

jl_value_t* readonly_type(DType dtype, int rank) {
  return julia_built_type(g_handles.readonly_types[static_cast<int>(dtype)][rank], g_handles.readonly_type, dtype,
                          rank, -1);
}

jl_datatype_t* dims_tuple_type(int rank) {
  return cached(g_handles.dims_tuples[rank], [&]() -> jl_datatype_t* {
    jl_value_t* n = jl_box_int64(rank);
    JL_GC_PUSH1(&n);
    jl_value_t* t = jl_call1(g_handles.dims_tuple_type, n);
    JL_GC_POP();
    if (t == nullptr) jl_exception_clear();
    return reinterpret_cast<jl_datatype_t*>(t);
  });
}

std::string describe_exception(jl_value_t* exception) {
  if (exception == nullptr) return "unknown Julia error";
  std::string text = jl_typeof_str(exception);
  jl_function_t* sprint = jl_get_function(jl_base_module, "sprint");
  jl_function_t* showerror = jl_get_function(jl_base_module, "showerror");
  JL_GC_PUSH1(&exception);
  jl_value_t* shown = jl_call2(sprint, showerror, exception);
  JL_GC_POP();
  if (shown != nullptr && jl_is_string(shown)) {
    text += ": ";
    text.append(jl_string_data(shown), jl_string_len(shown));
  } else {
    jl_exception_clear();
  }
  return text;
}

}  // namespace detail
}  // namespace tfjl
