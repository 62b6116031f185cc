#include "invoke.h"

#include <cstdint>
#include <cstring>
#include <unordered_map>

namespace tfjl {
namespace detail {
namespace {

// A valid, aligned address for empty tensors whose buffer pointer is null.
alignas(64) char g_empty_buffer[64];

bool valid_dtype(DType d) {
  const int v = static_cast<int>(d);
  return v >= 0 && v < kNumDTypes;
}

std::string check_shape(const std::vector<int64_t>& dims, size_t* count) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return "rank " + std::to_string(dims.size()) + " exceeds the runtime's limit of " + std::to_string(kMaxRank);
  }
  size_t c = 1;
  for (int64_t d : dims) {
    if (d < 0) return "negative dimension " + std::to_string(d);
    if (__builtin_mul_overflow(c, static_cast<size_t>(d), &c)) return "element count overflows";
  }
  *count = c;
  return "";
}

// Calls f(row_major_index, column_major_index) for every element of an array
// of TF shape `dims`, in row-major order.  String arrays are built in TF
// index order, so this maps TF's element order onto Julia's.
template <class F>
void for_each_element(const std::vector<int64_t>& dims, size_t count, F&& f) {
  const size_t rank = dims.size();
  if (rank <= 1) {
    for (size_t r = 0; r < count; ++r) f(r, r);
    return;
  }
  std::vector<size_t> stride(rank), index(rank, 0);
  stride[0] = 1;
  for (size_t k = 1; k < rank; ++k) stride[k] = stride[k - 1] * static_cast<size_t>(dims[k - 1]);
  size_t col = 0;
  for (size_t r = 0; r < count; ++r) {
    f(r, col);
    for (size_t k = rank; k-- > 0;) {  // odometer over the last (fastest in TF) dimension first
      col += stride[k];
      if (++index[k] < static_cast<size_t>(dims[k])) break;
      col -= stride[k] * static_cast<size_t>(dims[k]);
      index[k] = 0;
    }
  }
}

// An NTuple{rank,Int} of dims (reversed: the column-major buffer's size).
jl_value_t* new_dims_tuple(const std::vector<int64_t>& dims, bool reversed) {
  const size_t rank = dims.size();
  jl_value_t* t = jl_new_struct_uninit(dims_tuple_type(static_cast<int>(rank)));
  auto* out = reinterpret_cast<int64_t*>(jl_data_ptr(t));
  for (size_t k = 0; k < rank; ++k) out[k] = reversed ? dims[rank - 1 - k] : dims[k];
  return t;
}

void assign(std::string* out, jl_value_t* s) { out->assign(jl_string_data(s), jl_string_len(s)); }

}  // namespace

// The symbol of a plain name, cached by the address of the caller's string
// (a kernel passes the same literal on every call) and checked against its
// text, so a reused address with new contents is looked up again.  One
// cache per Julia thread, so no lock.  Symbols are permanent: caching them is
// safe, and the binding itself is read on every call, so redefinitions still
// count.
jl_sym_t* cached_symbol(const char* name) {
  struct Entry {
    std::string text;
    jl_sym_t* symbol;
  };
  thread_local std::unordered_map<const char*, Entry> cache;
  auto it = cache.find(name);
  if (it != cache.end() && it->second.text == name) return it->second.symbol;
  if (cache.size() >= 4096) cache.clear();  // callers building names on the fly
  jl_sym_t* symbol = jl_symbol(name);
  cache[name] = Entry{name, symbol};
  return symbol;
}

jl_value_t* resolve_function(const char* name) {
  if (name == nullptr || *name == '\0') return nullptr;
  if (std::strchr(name + 1, '.') == nullptr) return jl_get_global(jl_main_module, cached_symbol(name));
  jl_module_t* module = jl_main_module;
  const char* p = name;
  // A leading '.' belongs to the name (broadcast operators such as .+).
  for (const char* dot = std::strchr(p + 1, '.'); dot != nullptr; dot = std::strchr(p + 1, '.')) {
    jl_value_t* m = jl_get_global(module, jl_symbol_n(p, static_cast<size_t>(dot - p)));
    if (m == nullptr || !jl_is_module(m)) return nullptr;
    module = reinterpret_cast<jl_module_t*>(m);
    p = dot + 1;
    if (*p == '\0') return nullptr;
  }
  return jl_get_global(module, jl_symbol(p));
}

// TFBridge.function_not_found says what is missing (a module on the way, or
// the function), as it does for compiled entries.
Outcome not_found(const char* name) {
  TFJL_GC_ROOTS(r, 3);
  r[0] = handles().function_not_found;
  r[1] = jl_cstr_to_string(name != nullptr ? name : "");
  r[2] = jl_call(handles().protect, r, 2);  // a Failure (or the failure to make one)
  Outcome out = outcome_of(r[2]);
  if (out.error.empty()) out = {std::string("no Julia function ") + (name ? name : "(null)"), kNotFound};
  return out;
}

namespace {

// "<ExceptionType>: <message>" (just the message when it names its type, as
// OutOfMemoryError() does).  The type's name first: showing the exception
// may itself run out of memory, and then the name is all there is.
std::string exception_text(jl_value_t* exception) {
  if (exception == nullptr) return "an unknown Julia exception";
  std::string type = jl_typeof_str(exception);
  jl_value_t* shown = jl_call2(jl_get_function(jl_base_module, "sprint"),
                               jl_get_function(jl_base_module, "showerror"), exception);
  if (shown == nullptr || !jl_is_string(shown)) return type;
  std::string text(jl_string_data(shown), jl_string_len(shown));
  return text.compare(0, type.size(), type) == 0 ? text : type + ": " + text;
}

}  // namespace

Outcome escaped_exception(jl_value_t* exception, const CallStage& stage) {
  const bool out_of_memory = exception != nullptr && jl_typeis(exception, jl_typeof(jl_memory_exception));
  const int kind = out_of_memory ? kResourceExhausted : kInternal;
  try {
    std::string step = stage.step;
    if (const size_t at = step.find('%'); at != std::string::npos) {
      const bool known = stage.args != nullptr && stage.arg < stage.args->size();
      step.replace(at, 1, known ? describe_arg(*stage.args, stage.arg) : std::string("an argument"));
    }
    return {exception_text(exception) + " while the runtime was " + step +
                " (outside the function's try: this call fails, and the Julia thread goes on serving)",
            kind};
  } catch (...) {  // no memory left for the message: what fits in a std::string's own buffer
    return {out_of_memory ? "OutOfMemory" : "Julia error", kind};
  }
}

std::string describe_arg(const std::vector<Arg>& args, size_t i) {
  const Arg& a = args[i];
  const char* role = a.kind == Arg::Input ? "input" : a.kind == Arg::AttrValue ? "attribute" : "output";
  if (a.kind == Arg::DynamicOutput) role = "dynamic output";
  if (a.kind == Arg::Output && a.dtype == DType::String) role = "string output";
  if (a.name != nullptr) return std::string(role) + " '" + a.name + "'";
  return std::string(role) + " (argument " + std::to_string(i + 1) + ")";
}

Outcome outcome_of(jl_value_t* result) {
  if (result == nullptr) {
    std::string text = describe_exception(jl_exception_occurred());
    jl_exception_clear();
    return {"Julia error outside the bridge's handler: " + text, kInternal};
  }
  const Handles& h = handles();
  if (jl_typeis(result, h.failure)) {
    jl_value_t* text = jl_get_nth_field_noalloc(result, 0);
    const int64_t kind = *reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(result) +
                                                           jl_field_offset(h.failure, 1));
    Outcome out;
    assign(&out.error, text);
    out.kind = IsJuliaErrorKind(kind) ? static_cast<int>(kind) : kInternal;
    return out;
  }
  return {};
}

std::string Invocation::wrap(size_t i, jl_value_t** value, jl_value_t** keep) {
  const Arg& a = args_[i];
  if (!valid_dtype(a.dtype)) return "unknown dtype code " + std::to_string(static_cast<int>(a.dtype));
  switch (a.kind) {
    case Arg::Input:
    case Arg::Output:
      if (a.dtype == DType::String) return wrap_strings(a, a.kind == Arg::Output, value, keep);
      return wrap_numeric(a, value, keep);
    case Arg::DynamicOutput: {
      // A TFBridge.DynamicOutput(name, what): the name for the `p[] = A` of
      // messages, how errors call it, and its value still unassigned.
      const std::string what = describe(i);
      *keep = jl_pchar_to_string(what.data(), what.size());  // rooted while the struct is made
      jl_value_t* fields[2] = {
          reinterpret_cast<jl_value_t*>(a.name != nullptr ? cached_symbol(a.name) : jl_symbol("o")), *keep};
      *value = jl_new_structv(handles().dynamic_output, fields, 2);
      return "";
    }
    case Arg::AttrValue:
      if (a.dtype == DType::String) {
        *value = jl_pchar_to_string(a.s.data(), a.s.size());
        return "";
      }
      switch (a.dtype) {
        // A numeric scalar: the Arg field of its dtype (contract.h), converted to
        // its C++ type and boxed as its Julia type.
#define TFJL_BOX_SCALAR(name, cxx_type, field)                \
  case DType::name: {                                         \
    cxx_type v = static_cast<cxx_type>(a.field);              \
    *value = jl_new_bits(element_type(DType::name), &v);      \
    break;                                                    \
  }
        TFJL_SCALAR_DTYPES(TFJL_BOX_SCALAR)
#undef TFJL_BOX_SCALAR
        default:
          return "no scalar of dtype code " + std::to_string(static_cast<int>(a.dtype)) + " can be passed";
      }
      return "";
  }
  return "unknown argument kind " + std::to_string(static_cast<int>(a.kind));
}

std::string Invocation::wrap_numeric(const Arg& a, jl_value_t** value, jl_value_t** keep) {
  size_t count = 0;
  if (std::string err = check_shape(a.dims, &count); !err.empty()) return err;
  void* data = a.data;
  if (data == nullptr) {
    if (count != 0) return "null buffer for " + std::to_string(count) + " elements";
    data = g_empty_buffer;
  }
  const size_t esize = DTypeSize(a.dtype);
  if (reinterpret_cast<uintptr_t>(data) % esize != 0) {
    return "buffer is not aligned to its " + std::to_string(esize) + "-byte elements";
  }
  const int rank = static_cast<int>(a.dims.size());
  // A kernel's inputs are TF's buffers (fed arrays, constants, other ops'
  // outputs): Julia gets them as TFBridge.ReadOnlyArray, which refuses writes.
  const bool read_only = a.kind == Arg::Input && !a.writable;
  jl_value_t* atype = array_type(a.dtype, rank);
  if (rank >= 2 && dims_tuple_type(rank) == nullptr) return "Julia could not build the dims type";
  // own_buffer = 0: Julia never frees TF's (or numpy's) memory.
  jl_array_t* array = nullptr;
  if (read_only) {
    // ReadOnlyArray{T,N}(ptr, dims, name, root = nothing): the buffer's address
    // and column-major shape, no Array over it (julia/TFBridge/readonly.jl).
    auto* rtype = reinterpret_cast<jl_datatype_t*>(readonly_type(a.dtype, rank));
    if (rtype == nullptr) return "Julia could not build the read-only array type";
    const std::string unnamed = "argument " + std::to_string(&a - args_.data() + 1);
    jl_value_t* name = reinterpret_cast<jl_value_t*>(a.name != nullptr ? cached_symbol(a.name)
                                                                        : jl_symbol(unnamed.c_str()));
    *keep = jl_new_struct_uninit(rtype);  // pointer fields zeroed; nothing below allocates
    char* fields = reinterpret_cast<char*>(*keep);
    std::memcpy(fields + jl_field_offset(rtype, 0), &data, sizeof data);
    auto* dims = reinterpret_cast<int64_t*>(fields + jl_field_offset(rtype, 1));
    for (int k = 0; k < rank; ++k) dims[k] = a.dims[rank - 1 - k];  // TF's shape reversed
    // The reference fields, written directly (Julia 1.5's jl_set_nth_field
    // refuses an immutable struct): a Symbol and `nothing`, both permanent.
    *reinterpret_cast<jl_value_t**>(fields + jl_field_offset(rtype, 2)) = name;
    *reinterpret_cast<jl_value_t**>(fields + jl_field_offset(rtype, 3)) = jl_nothing;
    jl_gc_wb(*keep, name);
  } else if (rank == 0) {
    array = jl_ptr_to_array(atype, data, jl_emptytuple, 0);
  } else if (rank == 1) {
    array = jl_ptr_to_array_1d(atype, data, count, 0);
  } else {
    // The row-major buffer is a column-major array of the reversed shape; the
    // view (transpose / reversed PermutedDimsArray) restores TF's index order.
    *keep = new_dims_tuple(a.dims, /*reversed=*/true);
    array = jl_ptr_to_array(atype, data, *keep, 0);
  }
  if (!read_only) *keep = reinterpret_cast<jl_value_t*>(array);
  if (rank <= 1) {
    *value = *keep;
    return "";
  }
  jl_value_t* vtype = view_type(a.dtype, rank, read_only);
  if (vtype == nullptr) return "Julia could not build the view type";
  *value = jl_new_structv(reinterpret_cast<jl_datatype_t*>(vtype), keep, 1);
  return "";
}

std::string Invocation::wrap_strings(const Arg& a, bool fill_empty, jl_value_t** value, jl_value_t** keep) {
  size_t count = 0;
  if (std::string err = check_shape(a.dims, &count); !err.empty()) return err;
  if (!fill_empty && a.strings.size() != count) {
    return "string input has " + std::to_string(a.strings.size()) + " strings for " + std::to_string(count) +
           " elements";
  }
  const int rank = static_cast<int>(a.dims.size());
  if (rank == 0 && !fill_empty) {
    *value = jl_pchar_to_string(a.strings[0].data(), a.strings[0].size());
    return "";
  }
  if (rank >= 2 && dims_tuple_type(rank) == nullptr) return "Julia could not build the dims type";
  jl_value_t* atype = array_type(DType::String, rank);
  jl_array_t* array = nullptr;
  if (rank == 1) {
    array = jl_alloc_array_1d(atype, count);
  } else {
    *keep = rank == 0 ? jl_emptytuple : new_dims_tuple(a.dims, /*reversed=*/false);
    array = jl_new_array(atype, *keep);
  }
  *value = reinterpret_cast<jl_value_t*>(array);
  *keep = nullptr;
  if (fill_empty) {
    for (size_t j = 0; j < count; ++j) jl_array_ptr_set(array, j, handles().empty_string);
  } else {
    for_each_element(a.dims, count, [&](size_t r, size_t c) {
      // Stored at once: nothing allocates between creating s and rooting it in the array.
      jl_value_t* s = jl_pchar_to_string(a.strings[r].data(), a.strings[r].size());
      jl_array_ptr_set(array, c, s);
    });
  }
  return "";
}

Outcome Invocation::collect_outputs(jl_value_t* const* values) {
  for (size_t i = 0; i < args_.size(); ++i) {
    Arg& a = args_[i];
    at("copying % back from Julia, after the function returned", i);
    if (a.kind == Arg::DynamicOutput) {
      if (Outcome out = collect_dynamic(i, values[i]); !out.error.empty()) return out;
    } else if (a.kind == Arg::Output && a.dtype == DType::String) {
      auto* array = reinterpret_cast<jl_array_t*>(values[i]);
      size_t count = 0;
      check_shape(a.dims, &count);  // validated when wrapping
      if (jl_array_len(array) != count) {
        return {describe(i) + " now has " + std::to_string(jl_array_len(array)) + " elements, expected " +
                    std::to_string(count) + ": fill it in place",
                kInvalidArgument};
      }
      a.strings.resize(count);
      for_each_element(a.dims, count, [&](size_t r, size_t c) {
        // Array{String} elements are Strings; the array was pre-filled, so none is #undef.
        assign(&a.strings[r], jl_array_ptr_ref(array, c));
      });
    }
  }
  return {};
}

// A dynamic output: TFBridge.dynamic_result gives the shape of the value
// Julia assigned to the TFBridge.DynamicOutput `ref` (and, for strings, the
// strings in row-major order); once the shape passed the check against
// a.dims, the kernel's allocator (Arg::allocate) hands over TF's buffer and
// the value is copied into it once, while still rooted: a memcpy when its
// memory is already row-major (TFBridge's `source`), else
// TFBridge.store_dynamic! in one pass.  Without an allocator the same copy
// goes to a.result_bytes.  `ref` stays rooted by the call's frame.
Outcome Invocation::collect_dynamic(size_t i, jl_value_t* ref) {
  Arg& a = args_[i];
  const Handles& h = handles();
  const std::string which = describe(i);
  // [0..2] dynamic_result's call, [3] its DynamicValue (roots the value and
  // its source), [4..9] store_dynamic!'s call, [10] its result.
  TFJL_GC_ROOTS(r, 11);
  r[0] = h.dynamic_result;
  r[1] = ref;
  r[2] = element_type(a.dtype);
  r[3] = jl_call(h.protect, r, 3);
  if (Outcome out = outcome_of(r[3]); !out.error.empty()) return out;
  // TFBridge.DynamicValue(value, dims::Vector{Int64}, source): boxed fields.
  jl_value_t* value = jl_get_nth_field_noalloc(r[3], 0);
  auto* dims = reinterpret_cast<jl_array_t*>(jl_get_nth_field_noalloc(r[3], 1));
  jl_value_t* source = jl_get_nth_field_noalloc(r[3], 2);
  const auto* d = static_cast<const int64_t*>(jl_array_data(dims));
  a.result_dims.assign(d, d + jl_array_len(dims));
  if (!a.dims.empty()) {
    bool matches = a.dims.size() == a.result_dims.size();
    for (size_t k = 0; matches && k < a.dims.size(); ++k) {
      matches = a.dims[k] < 0 || a.dims[k] == a.result_dims[k];
    }
    if (!matches) {
      auto shape = [](const std::vector<int64_t>& v) {
        std::string s = "(";
        for (size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + (v[k] < 0 ? std::string("?") : std::to_string(v[k]));
        return s + (v.size() == 1 ? ",)" : ")");
      };
      return {which + " has shape " + shape(a.result_dims) + ", expected " + shape(a.dims), kInvalidArgument};
    }
  }
  size_t count = 0;
  if (std::string err = check_shape(a.result_dims, &count); !err.empty()) return {which + ": " + err, kInvalidArgument};
  if (a.dtype == DType::String) {
    auto* data = reinterpret_cast<jl_array_t*>(source);
    if (!jl_is_array(source) || jl_array_len(data) != count) {
      return {which + ": its strings do not match its shape", kInternal};
    }
    a.strings.resize(count);
    for (size_t j = 0; j < count; ++j) {
      jl_value_t* s = jl_array_ptr_ref(data, j);
      if (s == nullptr) return {which + " has an unassigned element", kInvalidArgument};
      assign(&a.strings[j], s);
    }
    return {};
  }
  const size_t esize = DTypeSize(a.dtype);
  size_t nbytes = 0;
  if (__builtin_mul_overflow(count, esize, &nbytes)) return {which + ": element count overflows", kInvalidArgument};
  void* buffer = nullptr;
  if (a.allocate != nullptr) {
    std::string err;
    int kind = kInternal;
    buffer = a.allocate(a, &err, &kind);
    if (buffer == nullptr && !err.empty()) return {which + ": " + err, kind != kOk ? kind : kInternal};
  } else {
    a.result_bytes.resize(nbytes);
    buffer = a.result_bytes.data();
  }
  if (nbytes == 0) return {};
  if (buffer == nullptr) return {which + ": the kernel gave no buffer for " + std::to_string(nbytes) + " bytes", kInternal};
  if (source != jl_nothing) {
    auto* src = reinterpret_cast<jl_array_t*>(source);
    if (!jl_is_array(source) || jl_array_len(src) != count || src->elsize != esize) {
      return {which + ": its row-major source does not match its shape", kInternal};
    }
    std::memcpy(buffer, jl_array_data(src), nbytes);
    return {};
  }
  r[4] = h.store_dynamic;
  r[5] = jl_box_voidpointer(buffer);
  r[6] = jl_box_int64(static_cast<int64_t>(nbytes));
  r[7] = element_type(a.dtype);
  r[8] = value;
  r[9] = ref;
  r[10] = jl_call(h.protect, r + 4, 6);
  return outcome_of(r[10]);
}

}  // namespace detail
}  // namespace tfjl
