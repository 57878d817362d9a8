// A main() for the fuzz targets in the normal (g++) build, where libFuzzer is not available:
// replays every seed, then runs seeded random mutations of them (bit flips, byte changes, inserts,
// deletions, duplicated ranges, splices of two seeds) for a bounded time or number of runs.
// No coverage feedback: it is the smoke test `make test` runs; scripts/fuzz/run.sh links the same
// targets with clang's libFuzzer for the long runs.
//
//   fuzz_<target> [--seconds=S] [--runs=N] [--seed=K] [--max-len=L] SEED_PATH...
//
// A SEED_PATH is a file or a folder (read recursively). A target that crashes or trips a
// sanitizer kills the process; the input it was running is first written to
// fuzz-crash-<pid>.bin in the current folder (from the signal handler), so it can be replayed:
// `fuzz_<target> fuzz-crash-<pid>.bin` runs that one input.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

using Input = std::vector<uint8_t>;

// The input being run, for the crash handler (plain globals: read from a signal handler).
const uint8_t* g_current_data = nullptr;
size_t g_current_size = 0;

void save_current_input(int signal_number) {
  char path[64];
  std::snprintf(path, sizeof(path), "fuzz-crash-%d.bin", static_cast<int>(getpid()));
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    size_t done = 0;
    while (g_current_data != nullptr && done < g_current_size) {
      const ssize_t n = write(fd, g_current_data + done, g_current_size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    close(fd);
    const char message[] = "fuzz driver: the failing input was saved to fuzz-crash-<pid>.bin\n";
    [[maybe_unused]] const ssize_t ignored = write(2, message, sizeof(message) - 1);
  }
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void run_one(const Input& input) {
  // A copy in a buffer of exactly its size, as libFuzzer gives it: ASan sees reads past the end.
  auto* buffer = static_cast<uint8_t*>(std::malloc(input.empty() ? 1 : input.size()));
  if (!input.empty()) std::memcpy(buffer, input.data(), input.size());
  g_current_data = buffer;
  g_current_size = input.size();
  LLVMFuzzerTestOneInput(buffer, input.size());
  g_current_data = nullptr;
  g_current_size = 0;
  std::free(buffer);
}

bool read_file(const std::filesystem::path& path, Input& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// Seeds from files and folders; a missing path is an error (a seed list that rotted would
// otherwise silently fuzz nothing).
bool load_seeds(const std::vector<std::string>& paths, std::vector<Input>& seeds) {
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::recursive_directory_iterator(p, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        Input input;
        if (read_file(f, input)) seeds.push_back(std::move(input));
      }
    } else {
      Input input;
      if (!read_file(p, input)) {
        std::fprintf(stderr, "fuzz driver: cannot read seed %s\n", p.c_str());
        return false;
      }
      seeds.push_back(std::move(input));
    }
  }
  return true;
}

class Mutator {
 public:
  Mutator(uint64_t seed, size_t max_len) : rng_(seed), max_len_(max_len) {}

  Input mutate(const std::vector<Input>& pool) {
    Input out = pool.empty() ? Input() : pool[below(pool.size())];
    const size_t num_edits = 1 + below(4);
    for (size_t i = 0; i < num_edits; ++i) edit(out, pool);
    if (out.size() > max_len_) out.resize(max_len_);
    return out;
  }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

  uint8_t interesting_byte() {
    static constexpr uint8_t kBytes[] = {0,   1,   2,   0x7f, 0x80, 0xff, 0xfe, '"', '\\', '{',
                                         '}', '[', ']', ',',  ':',  '0',  '9',  '-', '.',  ' ',
                                         '%', '(', ')', '|',  '\n', 'e',  0xc3, 0xe2};
    return kBytes[below(sizeof(kBytes))];
  }

  void edit(Input& data, const std::vector<Input>& pool) {
    switch (below(8)) {
      case 0:  // flip one bit
        if (!data.empty()) data[below(data.size())] ^= static_cast<uint8_t>(1u << below(8));
        break;
      case 1:  // set a byte to a random or an interesting value
        if (!data.empty()) {
          data[below(data.size())] = below(2) ? static_cast<uint8_t>(rng_()) : interesting_byte();
        }
        break;
      case 2: {  // insert a few bytes
        const size_t at = below(data.size() + 1);
        const size_t n = 1 + below(8);
        for (size_t k = 0; k < n; ++k) {
          data.insert(data.begin() + static_cast<std::ptrdiff_t>(at),
                      below(2) ? static_cast<uint8_t>(rng_()) : interesting_byte());
        }
        break;
      }
      case 3: {  // delete a range
        if (data.empty()) break;
        const size_t at = below(data.size());
        const size_t n = 1 + below(std::min<size_t>(data.size() - at, 16));
        data.erase(data.begin() + static_cast<std::ptrdiff_t>(at),
                   data.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      case 4: {  // duplicate a range somewhere else
        if (data.empty()) break;
        const size_t from = below(data.size());
        const size_t n = 1 + below(std::min<size_t>(data.size() - from, 32));
        const Input piece(data.begin() + static_cast<std::ptrdiff_t>(from),
                          data.begin() + static_cast<std::ptrdiff_t>(from + n));
        const size_t at = below(data.size() + 1);
        data.insert(data.begin() + static_cast<std::ptrdiff_t>(at), piece.begin(), piece.end());
        break;
      }
      case 5: {  // splice: a range of another seed replaces the tail
        if (pool.empty()) break;
        const Input& other = pool[below(pool.size())];
        if (other.empty()) break;
        const size_t cut = below(data.size() + 1);
        const size_t from = below(other.size());
        data.resize(cut);
        data.insert(data.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
        break;
      }
      case 6: {  // overwrite a 1/2/4/8-byte field with an extreme value (binary formats)
        const size_t width = size_t{1} << below(4);
        if (data.size() < width) break;
        const size_t at = below(data.size() - width + 1);
        const uint64_t values[] = {
            0, 1, ~uint64_t{0}, uint64_t{1} << 63, (uint64_t{1} << 31) - 1, rng_()};
        const uint64_t v = values[below(std::size(values))];
        std::memcpy(data.data() + at, &v, width);
        break;
      }
      default:  // truncate
        if (!data.empty()) data.resize(below(data.size()));
        break;
    }
  }

  std::mt19937_64 rng_;
  size_t max_len_;
};

bool flag_value(const char* arg, const char* name, uint64_t& out) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  out = std::strtoull(arg + n + 1, nullptr, 10);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  uint64_t seconds = 3, runs = 0, seed = 1, max_len = 4096;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (flag_value(argv[i], "--seconds", seconds) || flag_value(argv[i], "--runs", runs) ||
        flag_value(argv[i], "--seed", seed) || flag_value(argv[i], "--max-len", max_len)) {
      continue;
    }
    paths.emplace_back(argv[i]);
  }
  for (int s : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(s, save_current_input);

  std::vector<Input> seeds;
  if (!load_seeds(paths, seeds)) return 2;
  for (const Input& input : seeds) run_one(input);
  std::printf("fuzz driver: replayed %zu seeds\n", seeds.size());
  // A single file: replay only (reproducing a saved crash).
  if (paths.size() == 1 && !std::filesystem::is_directory(paths[0])) return 0;

  // Mutants grow the pool now and then, so edits can stack over several generations.
  std::vector<Input> pool = seeds;
  constexpr size_t kMaxPool = 4096;
  Mutator mutator(seed, max_len);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  uint64_t done = 0;
  while (runs == 0 ? std::chrono::steady_clock::now() < deadline : done < runs) {
    Input input = mutator.mutate(pool);
    run_one(input);
    ++done;
    if (done % 16 == 0 && pool.size() < kMaxPool) pool.push_back(std::move(input));
  }
  std::printf("fuzz driver: %llu mutated inputs (seed %llu), no crash\n",
              static_cast<unsigned long long>(done), static_cast<unsigned long long>(seed));
  return 0;
}
