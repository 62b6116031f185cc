/* The extern "C" API of libtfjl_runtime.so, used by Python (bridge.julia,
 * through cffi) and by programs without C++.
 *
 * Every function may be called from any thread: the runtime runs the Julia
 * work on Julia's own thread and blocks the caller until it is done.  Strings
 * and buffers handed out are malloc'ed and released with tfjl_free /
 * tfjl_value_free.  Functions returning int return 0 on success, otherwise an
 * error kind (tfjl::ErrorKind in tfjl/contract.h: 1 invalid argument, 2 not
 * found, 3 internal) with *err set to the message.
 *
 * bridge/julia/host.py feeds the text between the cffi markers to FFI.cdef, so
 * that region holds plain declarations only.
 */
#ifndef TFJL_CAPI_H_
#define TFJL_CAPI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library builds with hidden visibility; its API is exported explicitly. */
#pragma GCC visibility push(default)

/* cffi-begin */
typedef enum tfjl_arg_kind {
  TFJL_ARG_ARRAY = 0,   /* numeric array, zero-copy, TF (row-major) index order */
  TFJL_ARG_SCALAR = 1,  /* Float64/Float32 in f, Int32/Int64/Bool in i, String in s/len */
  TFJL_ARG_NOTHING = 2
} tfjl_arg_kind;

typedef struct tfjl_arg {
  int kind;              /* tfjl_arg_kind */
  int dtype;             /* tfjl::DType code (tfjl/contract.h) */
  void* data;            /* ARRAY: the buffer, must stay valid for the call */
  int ndims;
  const int64_t* dims;
  double f;
  int64_t i;
  const char* s;
  size_t len;
} tfjl_arg;

typedef enum tfjl_value_kind {
  TFJL_VALUE_NOTHING = 0,
  TFJL_VALUE_BOOL = 1,     /* i */
  TFJL_VALUE_INT = 2,      /* i */
  TFJL_VALUE_FLOAT = 3,    /* f */
  TFJL_VALUE_STRING = 4,   /* text/text_len (UTF-8) */
  TFJL_VALUE_BIGINT = 5,   /* text: decimal digits of an integer outside Int64 */
  TFJL_VALUE_ARRAY = 6,    /* text: numpy dtype string; data/nbytes row-major; ndims/dims */
  TFJL_VALUE_OTHER = 7     /* text: Julia's repr of the value */
} tfjl_value_kind;

typedef struct tfjl_value {
  int kind;              /* tfjl_value_kind */
  int64_t i;
  double f;
  char* text;
  size_t text_len;
  void* data;
  size_t nbytes;
  int ndims;
  int64_t* dims;
} tfjl_value;

/* Starts Julia's thread and initialises Julia once per process.  bindir and
 * image as the `julia` executable reports them (Sys.BINDIR, the sysimage);
 * bridge_jl: path of TFBridge.jl, or NULL for the copy built into the library.
 * Later calls return the first call's result.  Returns 0 or nonzero with the
 * reason in err (truncated to errlen). */
int tfjl_init(const char* bindir, const char* image, const char* bridge_jl, char* err, size_t errlen);
int tfjl_is_initialized(void);
int tfjl_on_julia_thread(void);
/* NULL, or why Julia cannot run in this process: it was forked from a process
 * that had started Julia, whose threads a child does not have.  Every entry
 * into Julia then fails at once with this text (error kind 5, failed
 * precondition) instead of waiting for those threads forever. */
const char* tfjl_forked(void);

/* Evaluates code (all top-level expressions, in Main); *result_repr = repr of the last value. */
int tfjl_eval(const char* code, char** result_repr, char** err);
/* Like tfjl_eval, but the last value converted (tfjl_value_kind); release with tfjl_value_free. */
int tfjl_eval_value(const char* code, tfjl_value* out, char** err);
/* Base.include(Main, path). */
int tfjl_include(const char* path, char** err);
/* Calls Main.<function>(args...) (a dotted name reaches into modules) and converts its value. */
int tfjl_call_value(const char* function, const tfjl_arg* args, int nargs, tfjl_value* out, char** err);
void tfjl_value_free(tfjl_value* v);
void tfjl_free(void* p);

/* Calls that ran directly on Julia's thread, and calls handed over to it. */
void tfjl_call_counts(uint64_t* direct, uint64_t* handed_over);

/* Registers the compiled entry of an op type (a C function pointer made by
 * Julia's @cfunction, see runtime.h): its kernels call it instead of looking
 * their function up and calling it through jl_call.  NULL unregisters. */
void tfjl_register_entry(const char* op_type, void* entry);
/* Calls made through compiled entries (included in tfjl_call_counts). */
uint64_t tfjl_entry_calls(void);

/* TF_SessionRun's signature with TensorFlow's types erased (pointers and ints);
 * the runtime does not link TensorFlow's C API library. */
typedef void (*tfjl_session_run_fn)(void* session, const void* run_options, const void* inputs,
        void* const* input_values, int ninputs, const void* outputs, void** output_values, int noutputs,
        const void* const* targets, int ntargets, void* run_metadata, void* status);

/* Runs TF_SessionRun (tf_session_run: its address, a tfjl_session_run_fn) on
 * one of Julia's threads with the arguments that follow, so kernels that TF
 * executes inline (a session with inter_op_parallelism_threads = -1) call
 * Julia directly.  Waits until the run is over (returns 0, its result in
 * status), or until timeout_us microseconds have passed (timeout_us >= 0;
 * returns 1) or an interrupt came (tfjl_interrupt, Ctrl-C; returns 2).  On
 * 1 and 2 the run is abandoned: its Julia ops are told
 * (TFBridge.checkinterrupt) and the ops still to come fail with Cancelled,
 * but it may go on for a while on Julia's thread, still using every
 * argument.  *pending then receives a handle: keep the arguments (and the
 * tensors they point to) alive until tfjl_run_is_done(*pending) or
 * tfjl_run_wait(*pending) says the run is over, then free what the run
 * produced and the handle (tfjl_run_release).  *pending is written once, as
 * the function returns (NULL when the run is over): a caller that must not
 * lose an abandoned run, whatever happens after the call (Python raising
 * KeyboardInterrupt as it returns), records *pending's address before the
 * call, set to a value of its own.  Returns 3 (a deadline) or 4 (an
 * interrupt) when the run ended although it had been abandoned first
 * (*pending NULL): its outputs and status are its own, and an error status
 * is the abandon's doing (the Julia code threw InterruptException). */
int tfjl_session_run_on_julia_thread(void* tf_session_run, void* session,
        const void* run_options, const void* inputs, void* const* input_values, int ninputs,
        const void* outputs, void** output_values, int noutputs,
        const void* const* targets, int ntargets, void* run_metadata, void* status,
        int64_t timeout_us, void** pending);
int tfjl_run_is_done(void* pending);
void tfjl_run_wait(void* pending);
void tfjl_run_release(void* pending);

/* Abandons every Julia call in flight, as Ctrl-C does: the kernels of
 * posted calls end with Cancelled (message: why), julia_thread runs return
 * 2, and the Julia code of each running call sees TFBridge.checkinterrupt()
 * throw InterruptException.  Returns how many calls it reached. */
int tfjl_interrupt(const char* why);

/* Waits up to timeout_us for every Julia call in flight (abandoned ones
 * included) to finish; returns how many are still in flight.  Called at
 * exit: a call finishing after Python began finalizing would free fed
 * tensors whose deallocators need Python. */
int tfjl_wait_idle(int64_t timeout_us);
/* (Re)installs the runtime's SIGINT handler in front of the current one (a
 * Python signal.signal() call replaces it); see tfjl_interrupt. */
void tfjl_ensure_sigint_hook(void);
/* cffi-end */

/* Test hook (docs/internals/kernels-cpp.md, "Output buffers"): the function that the
 * output pools of Julia kernels (tfjl/output_pool.h) call for a fresh buffer
 * when a free list is empty, instead of aligned_alloc.  It must return memory
 * that free() releases, or NULL: the output then fails with TF's
 * ResourceExhausted.  NULL restores aligned_alloc.  Process-wide, for every
 * kernel library; buffers already in the free lists are still handed out. */
void tfjl_set_output_pool_alloc(void* (*alloc)(size_t alignment, size_t size));

/* Python's GIL for Julia code that calls into Python's C API
 * (TFBridge.with_gil): entries into Julia do not hold it (unless
 * TFBRIDGE_JULIA_GIL=1), so Python threads run while Julia computes.
 * tfjl_gil_acquire waits for it (GC-safe on a Julia thread) and returns a
 * token for tfjl_gil_release; without Python it takes nothing. */
int tfjl_gil_acquire(void);
void tfjl_gil_release(int token);

#pragma GCC visibility pop

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TFJL_CAPI_H_ */
