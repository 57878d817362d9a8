// What the machine can do at most, measured in the benchmark's own run so ratios against it are
// taken under the same conditions: memory read bandwidth (the decode roofline: weight bytes per
// token / bandwidth) and the fp32 FMA peak of the best instruction set (the prefill roofline).
#pragma once

#include <atomic>
#include <cstdint>

#include "base/thread_pool.h"
#include "tensor/tensor.h"

namespace lm {

struct MachineLimits {
  double read_bytes_per_second = 0;  // best of several passes over a buffer far larger than cache
  double fma_flops_per_second = 0;   // 2 flops per lane per FMA, all pool threads
  const char* fma_isa = "";
};

MachineLimits measure_machine_limits(ThreadPool& pool, int64_t buffer_bytes = int64_t{1} << 30);

// One read pass over a buffer of its own, on demand: the bandwidth a decode step is compared with
// when the pass runs right beside it (the engine benchmark's paired roofline), so a host whose
// bandwidth swings from minute to minute (ours read 33-64 GB/s within a run) is compared with
// itself within a fraction of a second.
// The buffer has 2 MiB pages where the kernel allows them, as the weights' arenas do: 4 KiB
// pages stop the hardware prefetcher at every page and would read slower than the weights stream.
class ReadProbe {
 public:
  // Maps `bytes` (rounded down to words) and first touches every page from the pool's threads.
  ReadProbe(ThreadPool& pool, int64_t bytes);
  int64_t bytes() const { return num_words_ * static_cast<int64_t>(sizeof(uint64_t)); }
  // One pass over the whole buffer with all of the pool's threads: its bytes per second.
  double measure();

 private:
  ThreadPool& pool_;
  int64_t num_words_;
  Buffer buffer_;
  std::atomic<uint64_t> sink_{0};  // the sums, kept observable
};

// Per-ISA FMA loops (fma_probe_*.cc): runs `iterations` rounds of independent FMA chains and
// returns the flops executed; the result is kept live so the work cannot be optimised away.
double fma_probe_avx2(int64_t iterations, float* sink);
double fma_probe_avx512(int64_t iterations, float* sink);
// Sums `count` words with AVX2 loads (the read-bandwidth pass; a scalar loop is adder-bound).
uint64_t read_probe_avx2(const uint64_t* words, int64_t count);

}  // namespace lm
