// Drives libtfjl_runtime.so from plain C++ (no Python, no TensorFlow):
// checks results of direct, handed-over and concurrent calls and prints the
// per-call cost of each path.  Used by tests/julia/test_runtime_threads.py.
//
//   bench_runtime <bindir> <image> <TFBridge.jl> [calls]
// Prints lines "<name> <microseconds per call>" ("_noop": a function that does
// nothing, i.e. the runtime's own cost) and "OK" at the end; exits 1
// with a message on the first wrong result.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tfjl/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  std::exit(1);
}

void eval_or_die(const char* code) {
  char* repr = nullptr;
  char* err = nullptr;
  if (tfjl_eval(code, &repr, &err) != 0) fail(std::string("eval failed: ") + (err ? err : "?"));
  tfjl_free(repr);
}

// y .= tanh.(x) on n doubles through call_julia, checked exactly against std::tanh
// (Julia's tanh and glibc's agree to the last bit on these inputs is not
// guaranteed, so the check allows 1 ulp).
struct TanhCall {
  std::vector<double> x, y;
  std::vector<tfjl::Arg> args;

  explicit TanhCall(size_t n, double offset) : x(n), y(n, 0.0), args(2) {
    for (size_t i = 0; i < n; ++i) x[i] = offset + 0.01 * static_cast<double>(i);
    args[0].kind = tfjl::Arg::Output;
    args[0].dtype = tfjl::DType::Float64;
    args[0].data = y.data();
    args[0].dims = {static_cast<int64_t>(n)};
    args[1].kind = tfjl::Arg::Input;
    args[1].dtype = tfjl::DType::Float64;
    args[1].data = x.data();
    args[1].dims = {static_cast<int64_t>(n)};
  }

  void call(const char* fn) {
    int kind = -1;
    std::string err = tfjl::call_julia(fn, args, &kind);
    if (!err.empty() || kind != 0) fail("call_julia(" + std::string(fn) + "): " + err);
  }

  void check() const {
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = std::tanh(x[i]);
      if (std::fabs(y[i] - want) > 4e-16 * std::fabs(want) + 1e-300) fail("wrong tanh result");
    }
  }
};

double micros_per_call(Clock::duration d, long calls) {
  return std::chrono::duration<double, std::micro>(d).count() / static_cast<double>(calls);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) fail("usage: bench_runtime <bindir> <image> <TFBridge.jl> [calls]");
  const long calls = argc > 4 ? std::atol(argv[4]) : 20000;
  char init_err[1024] = {0};
  if (tfjl_init(argv[1], argv[2], argv[3], init_err, sizeof init_err) != 0) fail(init_err);
  if (tfjl_on_julia_thread() != 0) fail("main thread claims to be Julia's thread");

  eval_or_die("tanh_bench!(y, x) = (y .= tanh.(x); nothing)");
  eval_or_die("noop_bench!(y, x) = nothing");  // the runtime's own overhead
  eval_or_die("function tanh_gc!(y, x) GC.gc(false); y .= tanh.(x); nothing end");

  // Warm up (compiles protect for this signature), then the three paths.
  TanhCall warm(10, 0.0);
  warm.call("tanh_bench!");
  warm.check();

  TanhCall direct(10, 0.5);
  TanhCall noop(10, 0.5);
  noop.call("noop_bench!");
  Clock::duration direct_time{}, noop_time{};
  std::string err = tfjl::run_on_julia_thread([&] {
    if (!tfjl::on_julia_thread()) fail("run_on_julia_thread ran elsewhere");
    auto t0 = Clock::now();
    for (long i = 0; i < calls; ++i) direct.call("tanh_bench!");
    direct_time = Clock::now() - t0;
    t0 = Clock::now();
    for (long i = 0; i < calls; ++i) noop.call("noop_bench!");
    noop_time = Clock::now() - t0;
  });
  if (!err.empty()) fail(err);
  direct.check();
  std::printf("direct %.3f\n", micros_per_call(direct_time, calls));
  std::printf("direct_noop %.3f\n", micros_per_call(noop_time, calls));

  TanhCall handed(10, 1.0);
  auto t0 = Clock::now();
  for (long i = 0; i < calls; ++i) handed.call("tanh_bench!");
  std::printf("handed_over %.3f\n", micros_per_call(Clock::now() - t0, calls));
  handed.check();
  t0 = Clock::now();
  for (long i = 0; i < calls; ++i) noop.call("noop_bench!");
  std::printf("handed_over_noop %.3f\n", micros_per_call(Clock::now() - t0, calls));

  const int nthreads = 8;
  const long per_thread = calls / nthreads;
  std::vector<std::thread> threads;
  t0 = Clock::now();
  for (int t = 0; t < nthreads; ++t) {
    threads.emplace_back([t, per_thread] {
      TanhCall c(10, 0.1 * t);
      for (long i = 0; i < per_thread; ++i) {
        c.x[0] = 0.001 * static_cast<double>(i % 100);  // inputs change, results must follow
        c.call("tanh_bench!");
        c.check();
      }
    });
  }
  for (auto& th : threads) th.join();
  std::printf("contended_8_threads %.3f\n", micros_per_call(Clock::now() - t0, per_thread * nthreads));

  // A collection inside every call: the wrapped buffers and views must stay rooted.
  threads.clear();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      TanhCall c(1000, 0.2 * t);
      for (int i = 0; i < 50; ++i) {
        c.call("tanh_gc!");
        c.check();
      }
    });
  }
  for (auto& th : threads) th.join();

  // Errors come back as text and kind; the runtime stays usable.
  std::vector<tfjl::Arg> none;
  int kind = 0;
  err = tfjl::call_julia("no_such_function_here", none, &kind);
  if (kind != tfjl::kNotFound || err.find("no_such_function_here") == std::string::npos) fail("not-found: " + err);
  warm.call("tanh_bench!");

  uint64_t n_direct = 0, n_handed = 0;
  tfjl_call_counts(&n_direct, &n_handed);
  std::printf("counts %llu %llu\n", static_cast<unsigned long long>(n_direct),
              static_cast<unsigned long long>(n_handed));
  std::printf("OK\n");
  return 0;
}
