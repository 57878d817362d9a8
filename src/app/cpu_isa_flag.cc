#include "app/cpu_isa_flag.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

namespace lm {

void add_cpu_isa_flag(CLI::App& app, std::string& cpu_isa) {
  cpu_isa = "auto";
  app.add_option(
         "--cpu-isa", cpu_isa,
         "Highest instruction set the CPU kernels use: auto (the best this CPU and OS "
         "run), scalar, avx2, avx-vnni, avx512, avx512-vnni or avx512-bf16 (a level the CPU "
         "does not run: an error)")
      ->envname("CPU_ISA")
      ->capture_default_str();
}

Result<std::optional<kernels::Isa>> parse_cpu_isa(const std::string& requested) {
  if (requested == "auto") return std::optional<kernels::Isa>();
  if (auto isa = kernels::parse_isa(requested)) return std::optional<kernels::Isa>(*isa);
  return Error{
      "--cpu-isa must be auto, scalar, avx2, avx-vnni, avx512, avx512-vnni or avx512-bf16, not " +
      requested};
}

std::string cpu_isa_log_line(kernels::Isa used, kernels::Isa detected, bool capped,
                             const std::string& limit_reason) {
  std::string line = fmt::format("CPU kernels: {}", kernels::isa_name(used));
  if (capped) {
    line += fmt::format(" (capped by --cpu-isa; this CPU runs {})", kernels::isa_name(detected));
  } else {
    line += " (the best this CPU runs)";
  }
  if (!limit_reason.empty()) line += "; " + limit_reason;
  return line;
}

Result<std::string> apply_cpu_isa(const std::string& requested) {
  auto cap = parse_cpu_isa(requested);
  if (!cap.ok()) return cap.error();
  const std::string reason = kernels::isa_limit_reason(kernels::read_cpu_id());
  if (*cap) {
    if (Status s = kernels::select_isa(**cap); !s.ok())
      return Error{"--cpu-isa " + s.error().message};
  }
  return cpu_isa_log_line(kernels::best_isa(), kernels::detected_isa(),
                          cap->has_value() && **cap != kernels::detected_isa(), reason);
}

}  // namespace lm
