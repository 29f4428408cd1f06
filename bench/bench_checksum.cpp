// What Note [Tensor checksums] costs: loading a 100 MB safetensors file that records a checksum
// per tensor (verified) against the same bytes in a file that records none (unchecked), and the
// XXH3 hash alone over the same 100 MB in memory. The files are written once into $TMPDIR (or
// /tmp) and read back each iteration; after the first read they come from the page cache, so the
// load is the copy plus the hash, the worst case for the check's share.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "bench/bench_common.h"
#include "serialize/checksum.h"
#include "serialize/safetensors.h"

namespace {

using namespace ember;

constexpr int64_t kTensors = 4;
constexpr int64_t kFloatsPerTensor = 100'000'000 / 4 / kTensors;  // 100 MB in all

std::string temp_path(const char* name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/ember_bench_checksum_" + std::to_string(::getpid()) + "_" + name;
}

nn::StateDict state() {
  nn::StateDict s;
  for (char i = 0; i < kTensors; ++i) s[std::string{'w', static_cast<char>('0' + i)}] = rand({kFloatsPerTensor});
  return s;
}

// The same tensors as a safetensors file with no metadata: what another writer produces.
void write_unchecked(const nn::StateDict& s, const std::string& path) {
  std::ostringstream json;
  json << "{";
  int64_t offset = 0;
  for (const auto& [name, t] : s) {
    if (offset > 0) json << ",";
    json << "\"" << name << "\":{\"dtype\":\"F32\",\"shape\":[" << t.numel() << "],\"data_offsets\":[" << offset
         << "," << offset + t.nbytes() << "]}";
    offset += t.nbytes();
  }
  json << "}";
  std::string header = json.str();
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t size = header.size();
  out.write(reinterpret_cast<const char*>(&size), 8);
  out << header;
  for (const auto& [name, t] : s) out.write(static_cast<const char*>(t.raw_data()), t.nbytes());
}

struct Files {
  std::string checked = temp_path("checked.safetensors"), unchecked = temp_path("unchecked.safetensors");
  nn::StateDict tensors = state();
  Files() {
    nn::save_safetensors(tensors, checked);
    write_unchecked(tensors, unchecked);
  }
  ~Files() {
    std::remove(checked.c_str());
    std::remove(unchecked.c_str());
  }
};

Files& files() {
  static Files f;
  return f;
}

void load(benchmark::State& st, const std::string& path) {
  for (auto _ : st) {
    nn::StateDict loaded = nn::load_safetensors(path);
    benchmark::DoNotOptimize(loaded.begin()->second.raw_data());
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * kTensors * kFloatsPerTensor * 4);
}

void BM_LoadChecked100MB(benchmark::State& st) { load(st, files().checked); }
void BM_LoadUnchecked100MB(benchmark::State& st) { load(st, files().unchecked); }

void BM_Xxh3Over100MB(benchmark::State& st) {
  const nn::StateDict& s = files().tensors;
  for (auto _ : st) {
    uint64_t sum = 0;
    for (const auto& [name, t] : s) sum ^= nn::checksum(t.raw_data(), t.nbytes());
    benchmark::DoNotOptimize(sum);
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * kTensors * kFloatsPerTensor * 4);
}

BENCHMARK(BM_LoadChecked100MB)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_LoadUnchecked100MB)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_Xxh3Over100MB)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace

int main(int argc, char** argv) {
  if (!ember::bench::setup_threads(argc, argv, "bench_checksum")) return 1;
  return ember::bench::run_benchmarks(argc, argv);
}
