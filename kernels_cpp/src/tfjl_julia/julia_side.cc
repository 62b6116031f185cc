// The Julia side's entry table (libtfjl_julia.so): every function runs on
// Julia's thread, called by the runtime's hand-over.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "invoke.h"
#include "julia_handles.h"
#include "julia_side.h"

namespace tfjl {
namespace detail {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
using MallocPtr = std::unique_ptr<T, FreeDeleter>;

template <class T>
MallocPtr<T> malloc_array(size_t n) {
  // malloc(0) may return null; one spare element keeps "no memory" unambiguous.
  auto* p = static_cast<T*>(std::malloc((n + 1) * sizeof(T)));
  if (p == nullptr) throw std::bad_alloc();
  return MallocPtr<T>(p);
}

MallocPtr<char> malloc_string(const char* data, size_t len) {
  MallocPtr<char> s = malloc_array<char>(len);
  std::memcpy(s.get(), data, len);
  s.get()[len] = '\0';
  return s;
}

std::vector<Arg> string_arg(const char* s) {
  std::vector<Arg> args(1);
  args[0].kind = Arg::AttrValue;
  args[0].dtype = DType::String;
  args[0].s = s;
  return args;
}

MallocPtr<char> string_field(jl_value_t* v, size_t field, size_t* len) {
  jl_value_t* s = jl_get_nth_field_noalloc(v, field);
  *len = jl_string_len(s);
  return malloc_string(jl_string_data(s), *len);
}

// A value returned by TFBridge.protect_value (already one of the forms
// py_value produces) -> tfjl_value.  *out is written only on success.
void fill_value(jl_value_t* v, tfjl_value* out) {
  const Handles& h = handles();
  tfjl_value r{};
  MallocPtr<char> text;
  MallocPtr<void> data;
  MallocPtr<int64_t> dims;
  if (v == jl_nothing) {
    r.kind = TFJL_VALUE_NOTHING;
  } else if (jl_typeis(v, jl_bool_type)) {
    r.kind = TFJL_VALUE_BOOL;
    r.i = jl_unbox_bool(v);
  } else if (jl_typeis(v, jl_int64_type)) {
    r.kind = TFJL_VALUE_INT;
    r.i = jl_unbox_int64(v);
  } else if (jl_typeis(v, jl_float64_type)) {
    r.kind = TFJL_VALUE_FLOAT;
    r.f = jl_unbox_float64(v);
  } else if (jl_is_string(v)) {
    r.kind = TFJL_VALUE_STRING;
    r.text_len = jl_string_len(v);
    text = malloc_string(jl_string_data(v), r.text_len);
  } else if (jl_typeis(v, h.py_bigint)) {
    r.kind = TFJL_VALUE_BIGINT;
    text = string_field(v, 0, &r.text_len);
  } else if (jl_typeis(v, h.py_array)) {
    r.kind = TFJL_VALUE_ARRAY;
    text = string_field(v, 0, &r.text_len);  // numpy typestr
    auto* d = reinterpret_cast<jl_array_t*>(jl_get_nth_field_noalloc(v, 1));
    auto* a = reinterpret_cast<jl_array_t*>(jl_get_nth_field_noalloc(v, 2));
    r.ndims = static_cast<int>(jl_array_len(d));
    dims = malloc_array<int64_t>(static_cast<size_t>(r.ndims));
    std::memcpy(dims.get(), jl_array_data(d), static_cast<size_t>(r.ndims) * sizeof(int64_t));
    r.nbytes = static_cast<size_t>(*reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(v) +
                                                                      jl_field_offset(h.py_array, 3)));
    data = malloc_array<char>(r.nbytes);
    std::memcpy(data.get(), jl_array_data(a), r.nbytes);
  } else if (jl_typeis(v, h.py_repr)) {
    r.kind = TFJL_VALUE_OTHER;
    text = string_field(v, 0, &r.text_len);
  } else {
    r.kind = TFJL_VALUE_OTHER;  // not produced by py_value; the type name is the best we can say
    const char* name = jl_typeof_str(v);
    r.text_len = std::strlen(name);
    text = malloc_string(name, r.text_len);
  }
  r.text = text.release();
  r.data = data.release();
  r.dims = dims.release();
  *out = r;
}

// Every entry below runs its Julia work under julia_guarded (invoke.h): a
// Julia exception outside the function's `try` fails the call, not the
// Julia thread's serving loop.  InJulia comes first, so that the catch
// returns to the GC-unsafe state it set up.

Outcome call(const char* function, std::vector<Arg>& args) {
  InJulia in_julia;
  CallStage stage;
  return julia_guarded(stage, [&] {
    stage.step = "looking up the function";
    jl_value_t* f = resolve_function(function);
    if (f == nullptr) return not_found(function);
    return Invocation(args, &stage).call(handles().protect, f, [](jl_value_t*) {});
  });
}

Outcome call_entry(EntryFn entry, const EntryArgs& args) {
  // No jl_call around the entry: its own try catches whatever the user's
  // function throws (and the wrapping of its arguments), and records the
  // failure (TFBridge.entry_failure).  Only a failure of that catch itself
  // (out of memory while it formats the error) reaches julia_guarded.
  InJulia in_julia;
  CallStage stage;
  stage.step = "in the compiled entry (its try did not catch it: the failure could not be recorded)";
  return julia_guarded(stage, [&]() -> Outcome {
    const int kind = entry(args.data, args.ints, args.floats);
    if (kind == kOk) return {};
    stage.step = "reading the compiled entry's failure";
    Outcome out = outcome_of(jl_array_ptr_ref(handles().last_failures, jl_threadid()));
    if (out.error.empty()) {  // never a success: the entry said it failed
      out = {"the compiled entry failed (error kind " + std::to_string(kind) + ") but recorded no failure",
             IsJuliaErrorKind(kind) ? kind : kInternal};
    }
    return out;
  });
}

Outcome call_value(const char* function, std::vector<Arg>& args, tfjl_value* out) {
  InJulia in_julia;
  CallStage stage;
  return julia_guarded(stage, [&] {
    stage.step = "looking up the function";
    jl_value_t* f = resolve_function(function);
    if (f == nullptr) return not_found(function);
    return Invocation(args, &stage).call(handles().protect_value, f, [&](jl_value_t* v) { fill_value(v, out); });
  });
}

Outcome eval_value(const char* code, tfjl_value* out) {
  InJulia in_julia;
  CallStage stage;
  std::vector<Arg> args = string_arg(code);
  return julia_guarded(stage, [&] {
    return Invocation(args, &stage).call(handles().protect_value, handles().eval_code,
                                         [&](jl_value_t* v) { fill_value(v, out); });
  });
}

Outcome eval_repr(const char* code, char** repr) {
  InJulia in_julia;
  CallStage stage;
  std::vector<Arg> args = string_arg(code);
  return julia_guarded(stage, [&] {
    return Invocation(args, &stage).call(handles().protect, handles().eval_repr, [&](jl_value_t* v) {
      if (jl_is_string(v)) *repr = malloc_string(jl_string_data(v), jl_string_len(v)).release();
    });
  });
}

Outcome include(const char* path) {
  InJulia in_julia;
  CallStage stage;
  std::vector<Arg> args = string_arg(path);
  return julia_guarded(stage, [&] {
    return Invocation(args, &stage).call(handles().protect, handles().include_file, [](jl_value_t*) {});
  });
}

int idle_begin() { return jl_gc_safe_enter(current_ptls()); }

void idle_end(int state) { jl_gc_safe_leave(current_ptls(), static_cast<int8_t>(state)); }

std::string serve_forever(void (*serve)(int, int)) {
  jl_value_t* fn = jl_box_voidpointer(reinterpret_cast<void*>(serve));
  JL_GC_PUSH1(&fn);
  jl_call1(handles().serve_on_threads, fn);  // returns only if it fails
  JL_GC_POP();
  jl_value_t* exception = jl_exception_occurred();
  jl_exception_clear();
  return "starting Julia's serving threads failed: " + describe_exception(exception);
}

const JuliaSide kJuliaSide = {kJuliaSideAbi, &initialise_julia, &call,       &call_entry, &call_value,
                              &eval_value,   &eval_repr,        &include,    &idle_begin, &idle_end,
                              &serve_forever};

}  // namespace
}  // namespace detail
}  // namespace tfjl

extern "C" __attribute__((visibility("default"))) const tfjl::detail::JuliaSide* tfjl_julia_side() {
  return &tfjl::detail::kJuliaSide;
}
