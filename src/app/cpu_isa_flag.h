// --cpu-isa (env CPU_ISA, ours): the highest instruction-set level the CPU kernels may use, for
// the launcher's serve and generate commands and text-generation-benchmark. Applied once at
// start, before a model is loaded (the level decides the weights' layout).
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "kernels/cpu/isa.h"

namespace CLI {
class App;
}

namespace lm {

inline constexpr const char* kCpuIsaValues[] = {"auto",   "scalar",      "avx2",       "avx-vnni",
                                                "avx512", "avx512-vnni", "avx512-bf16"};

// Adds --cpu-isa (env CPU_ISA), default auto.
void add_cpu_isa_flag(CLI::App& app, std::string& cpu_isa);

// The cap a --cpu-isa value asks for: none for auto; an error naming the values otherwise.
Result<std::optional<kernels::Isa>> parse_cpu_isa(const std::string& requested);

// The start log line: the level used, whether --cpu-isa capped it, and why the CPU stops below a
// level it advertises (kernels::isa_limit_reason), e.g.
// "CPU kernels: avx2 (capped by --cpu-isa; this CPU runs avx512-vnni)".
std::string cpu_isa_log_line(kernels::Isa used, kernels::Isa detected, bool capped,
                             const std::string& limit_reason);

// parse_cpu_isa + kernels::select_isa on this machine. Returns the log line, or an error when the
// value is unknown or a level this CPU does not run.
Result<std::string> apply_cpu_isa(const std::string& requested);

}  // namespace lm
