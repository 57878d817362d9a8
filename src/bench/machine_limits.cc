#include "bench/machine_limits.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"

namespace lm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double read_bandwidth(ThreadPool& pool, int64_t bytes) {
  ReadProbe probe(pool, bytes);
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) best = std::max(best, probe.measure());
  return best;
}

double fma_peak(ThreadPool& pool, const char** isa_name) {
  double (*probe)(int64_t, float*) = nullptr;
  // The peak of the level the kernels use (--cpu-isa caps it), which the CPU runs.
  const auto level = static_cast<int>(kernels::best_isa());
  if (level >= static_cast<int>(kernels::Isa::kAvx512)) {  // VNNI adds no fp32 FMA
    probe = fma_probe_avx512;
    *isa_name = "avx512";
  } else if (level >= static_cast<int>(kernels::Isa::kAvx2)) {
    probe = fma_probe_avx2;
    *isa_name = "avx2";
  } else {
    *isa_name = "none";
    return 0;
  }
  constexpr int64_t kIterations = 20'000'000;
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<float> sinks(static_cast<size_t>(pool.num_threads()) * 16, 0.0f);
    std::atomic<double> flops{0};
    const auto start = Clock::now();
    pool.parallel_for(pool.num_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const double f = probe(kIterations, &sinks[static_cast<size_t>(t) * 16]);
        double old = flops.load();
        while (!flops.compare_exchange_weak(old, old + f)) {
        }
      }
    });
    best = std::max(best, flops.load() / seconds_since(start));
  }
  return best;
}

}  // namespace

ReadProbe::ReadProbe(ThreadPool& pool, int64_t bytes)
    : pool_(pool),
      num_words_(std::max<int64_t>(bytes / 8, 1)),
      buffer_(Buffer::of_bytes(num_words_ * 8, Buffer::Pages::kHuge)) {
  // Touch every page from the threads that will read it (first-touch placement: the mapping is
  // untouched until now).
  auto* words = static_cast<uint64_t*>(buffer_.view().data);
  pool_.parallel_for(num_words_, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) words[i] = static_cast<uint64_t>(i);
  });
}

double ReadProbe::measure() {
  const bool avx2 = kernels::isa_supported(kernels::Isa::kAvx2);
  const auto start = Clock::now();
  const auto* words = static_cast<const uint64_t*>(buffer_.view().data);
  pool_.parallel_for(
      num_words_,
      [&](int64_t begin, int64_t end) {
        const uint64_t* first = words + begin;
        if (avx2) {
          sink_ += read_probe_avx2(first, end - begin);
          return;
        }
        uint64_t s0 = 0, s1 = 0;
        int64_t i = 0;
        for (; i + 2 <= end - begin; i += 2) {
          s0 += first[i];
          s1 += first[i + 1];
        }
        for (; i < end - begin; ++i) s0 += first[i];
        sink_ += s0 + s1;
      },
      4096);
  return static_cast<double>(bytes()) / seconds_since(start);
}

MachineLimits measure_machine_limits(ThreadPool& pool, int64_t buffer_bytes) {
  MachineLimits m;
  m.read_bytes_per_second = read_bandwidth(pool, buffer_bytes);
  m.fma_flops_per_second = fma_peak(pool, &m.fma_isa);
  return m;
}

}  // namespace lm
