// Fatal signals and stack overflows in Julia code (part of libtfjl_julia.so);
// signals.cc explains both, docs/internals/kernels-cpp.md, "Crashes and stack
// overflows", says what a user sees.
#ifndef TFJL_SRC_TFJL_JULIA_SIGNALS_H_
#define TFJL_SRC_TFJL_JULIA_SIGNALS_H_

namespace tfjl {
namespace detail {

// How long the handler of a fatal signal may run before the watchdog ends
// the process (Julia prints its message and backtrace in well under a second).
constexpr int kFatalHandlerSeconds = 10;

// Called once, on Julia's first thread right after jl_init_with_image:
// names stack overflows of that thread's root task StackOverflowError, and
// puts the crash watchdog in front of Julia's fatal-signal handlers.
void install_signal_guards();

}  // namespace detail
}  // namespace tfjl

#endif  // TFJL_SRC_TFJL_JULIA_SIGNALS_H_
