// Safetensors save/load (serialize/safetensors.h) and the JSON subset under it (serialize/json.h): bitwise round
// trips, module save/load, the exact bytes ember writes, files written by PyTorch
// (tests/fixtures/make_safetensors_fixtures.py), a clear error for every kind of bad file, and
// atomic saves (Note [Atomic saves]): permissions, failures, a killed saver, concurrent savers.
//
// Set EMBER_SAFETENSORS_OUT=/some/file.safetensors to keep a copy of the round-trip file for
//     /usr/bin/python3 tests/fixtures/make_safetensors_fixtures.py --check /some/file.safetensors
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include "core/generator.h"
#include "fixture.h"
#include "nn/batch_norm.h"
#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/state_dict_mapping.h"
#include "serialize/checksum.h"
#include "serialize/json.h"
#include "serialize/safetensors.h"
#include "temp_dir.h"
#include "utils/atomic_file.h"
#ifdef EMBER_WITH_CUDA
#include "cuda/context.h"
#endif

using namespace ember;
using nn::Metadata;
using nn::StateDict;
namespace fs = std::filesystem;

namespace {

std::string bytes_of(const Tensor& t) {
  Tensor host = t.detach().to(kCPU).contiguous();
  return std::string(static_cast<const char*>(host.raw_data()), host.nbytes());
}

template <class T>
std::string raw(T value) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

// What a safetensors file of `header` and `data` looks like (no padding: readers must not need it).
std::string safetensors_bytes(const std::string& header, const std::string& data = "") {
  return raw(static_cast<uint64_t>(header.size())) + header + data;
}

void expect_same(const Tensor& got, const Tensor& expected, const std::string& name) {
  EXPECT_EQ(got.dtype(), expected.dtype()) << name;
  EXPECT_EQ(got.shape(), expected.shape()) << name;
  EXPECT_EQ(bytes_of(got), bytes_of(expected)) << name << ": the bits differ";
}

std::vector<std::string> keys(const StateDict& state) {
  std::vector<std::string> out;
  for (const auto& [k, v] : state) out.push_back(k);
  return out;
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an ember::Error containing '" << needles.front() << "'";
  } catch (const Error& e) {
    for (const auto& needle : needles)
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "'" << needle << "' not in: " << e.what();
  }
}

// Every dtype, a 0-d and an empty tensor, a non-contiguous view, one that requires grad, and
// values whose bits matter (-0.0, 2^53 + 1, 1e300). make_safetensors_fixtures.py --check expects
// exactly this (check_tensors() there).
StateDict check_state() {
  StateDict s;
  s["linear.weight"] = from_vector(std::vector<double>{0.5, -1.25, 3.0e-8, 1.0 / 3.0, -0.0, 65504.0}, {2, 3}, kFloat32);
  s["linear.bias"] = from_vector(std::vector<double>{0.1, -0.2}, {2}, TensorOptions(kFloat32).with_requires_grad());
  s["stats.f64"] = from_vector(std::vector<double>{1.0 / 3.0, -2.5e-300, 1e300}, {3}, kFloat64);
  s["count.i64"] = from_vector(std::vector<int64_t>{-7, 0, int64_t{1} << 40, 9007199254740993}, {2, 2}, kInt64);
  s["pixels.u8"] = from_vector(std::vector<uint8_t>{0, 1, 127, 255}, {4}, kUInt8);
  s["temperature"] = scalar_tensor(0.75);
  s["empty"] = zeros({0, 3});
  s["transposed"] = arange(6).reshape({2, 3}).t();
  return s;
}

const Metadata kCheckMetadata{{"format", "pt"}, {"note", "ember \"quoted\" \xC3\xBC\n"}};

struct Net : nn::Module {
  nn::Linear fc{4, 3};
  nn::BatchNorm1d bn{3};
  Net() {
    register_module("fc", fc);
    register_module("bn", bn);
  }
  Tensor forward(const Tensor& x) override { return bn(fc(x)); }
};

class Serialize : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return temp_.path(name); }

  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }

  static std::string read(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  // The temporary files of Note [Atomic saves] in the test's folder.
  std::vector<std::string> temp_files() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(temp_.dir()))
      if (entry.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(entry.path().string());
    return out;
  }

  ember::testing::TempDir temp_;
};

const std::string kFixtures = EMBER_FIXTURES_DIR;

// A state dict whose size depends on `k`, so that two savers' bytes could not interleave into
// a file that still loads.
StateDict numbered_state(int k) { return {{"w", full({k + 1}, static_cast<double>(k))}, {"k", scalar_tensor(k)}}; }

}  // namespace

TEST_F(Serialize, RoundTripIsBitwise) {
  const StateDict state = check_state();
  const std::string file = path("all.safetensors");
  nn::save_safetensors(state, file, kCheckMetadata);
  if (const char* out = std::getenv("EMBER_SAFETENSORS_OUT")) nn::save_safetensors(state, out, kCheckMetadata);
  EXPECT_EQ(temp_files(), std::vector<std::string>{});

  Metadata metadata{{"stale", "entry"}};
  const StateDict back = nn::load_safetensors(file, &metadata);
  EXPECT_EQ(metadata, kCheckMetadata);
  ASSERT_EQ(keys(back), keys(state));
  for (const auto& [name, t] : state) {
    expect_same(back.at(name), t, name);
    EXPECT_FALSE(back.at(name).requires_grad()) << name;
    EXPECT_TRUE(back.at(name).is_contiguous()) << name;
  }
  EXPECT_EQ(back.at("temperature").dim(), 0);
  EXPECT_EQ(back.at("count.i64").to_vector<int64_t>()[3], 9007199254740993);

  // Saving over an existing file replaces it.
  nn::save_safetensors({{"only", ones({1})}}, file);
  EXPECT_EQ(keys(nn::load_safetensors(file, &metadata)), std::vector<std::string>{"only"});
  EXPECT_TRUE(metadata.empty());
}

#ifdef EMBER_WITH_CUDA
TEST_F(Serialize, SavesCudaTensorsThroughTheHost) {
  if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const StateDict state = check_state();
  StateDict on_gpu;
  for (const auto& [name, t] : state) on_gpu[name] = t.to(kCUDA);
  const std::string file = path("gpu.safetensors");
  nn::save_safetensors(on_gpu, file);
  const StateDict back = nn::load_safetensors(file);
  ASSERT_EQ(keys(back), keys(state));
  for (const auto& [name, t] : state) {
    EXPECT_TRUE(back.at(name).device().is_cpu()) << name;
    expect_same(back.at(name), t, name);
  }
}
#endif

TEST_F(Serialize, WritesTheExpectedBytes) {
  const StateDict state{{"b", from_vector(std::vector<double>{1.5, -2}, {2}, kFloat32)},
                        {"a", from_vector(std::vector<uint8_t>{1, 2, 3}, {3}, kUInt8)},
                        {"c", scalar_tensor(7, kInt64)}};
  const std::string file = path("small.safetensors");
  nn::save_safetensors(state, file, {{"k", "v"}});

  // Sorted keys, data in the same order, header padded with spaces so the data is 8-aligned; the
  // metadata holds each tensor's checksum (Note [Tensor checksums]).
  const std::string a_bytes("\x01\x02\x03", 3), b_bytes = raw(1.5f) + raw(-2.0f), c_bytes = raw(int64_t{7});
  auto sum_of = [](const std::string& bytes) { return nn::checksum_hex(nn::checksum(bytes.data(), bytes.size())); };
  std::string header = R"({"__metadata__":{"ember.xxh3_64.a":")" + sum_of(a_bytes) +
                       R"(","ember.xxh3_64.b":")" + sum_of(b_bytes) + R"(","ember.xxh3_64.c":")" + sum_of(c_bytes) +
                       R"(","k":"v"},)"
                       R"("a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[3,11]},)"
                       R"("c":{"dtype":"I64","shape":[],"data_offsets":[11,19]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string data = a_bytes + b_bytes + c_bytes;
  const std::string bytes = read(file);
  EXPECT_EQ(bytes, safetensors_bytes(header, data));

  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  const json::Value parsed = json::parse(bytes.substr(8, n));
  ASSERT_NE(parsed.find("b"), nullptr);
  const json::Value& offsets = *parsed.find("b")->find("data_offsets");
  EXPECT_EQ(offsets.items.at(0).integer, 3);
  EXPECT_EQ(offsets.items.at(1).integer, 11);
  EXPECT_EQ(parsed.find("__metadata__")->find("k")->string, "v");
}

TEST_F(Serialize, ModuleSaveAndLoadKeepsHandles) {
  manual_seed(1);
  Net a;
  a(randn({5, 4}));
  a(randn({5, 4}));  // moves the running statistics, num_batches_tracked = 2
  const std::string file = path("net.safetensors");
  nn::save(a, file);

  manual_seed(2);
  Net b;
  std::vector<TensorImpl*> before;
  for (const Tensor& t : b.parameters()) before.push_back(t.impl());
  for (const Tensor& t : b.buffers()) before.push_back(t.impl());
  TensorImpl* weight = b.fc.weight.impl();
  nn::load(b, file);

  const StateDict want = a.state_dict(), got = b.state_dict();
  ASSERT_EQ(keys(got), keys(want));
  for (const auto& [name, t] : want) expect_same(got.at(name), t, name);
  EXPECT_EQ(b.bn.num_batches_tracked.item<int64_t>(), 2);

  std::vector<TensorImpl*> after;
  for (const Tensor& t : b.parameters()) after.push_back(t.impl());
  for (const Tensor& t : b.buffers()) after.push_back(t.impl());
  EXPECT_EQ(after, before);
  EXPECT_EQ(b.fc.weight.impl(), weight);
  EXPECT_TRUE(b.fc.weight.requires_grad());

  a.eval();
  b.eval();
  const Tensor x = randn({2, 4});
  expect_same(b(x), a(x), "output");
}

TEST_F(Serialize, LoadsAFileWrittenByPyTorch) {
  const std::string file = kFixtures + "/torch_written.safetensors";
  Metadata metadata;
  const StateDict state = nn::load_safetensors(file, &metadata);
  EXPECT_EQ(metadata, (Metadata{{"format", "pt"}}));

  const auto expected = testutil::Fixture::load("torch_written.txt");
  std::vector<std::string> names = expected.names();
  std::sort(names.begin(), names.end());
  ASSERT_EQ(keys(state), names);
  // The text format has no uint8, so dtypes are checked here (the fixture's comment lists them).
  const std::map<std::string, DType> dtypes{
      {"bn.num_batches_tracked", kInt64}, {"pixels", kUInt8}, {"scale", kFloat64}};
  for (const auto& [name, t] : state) {
    const Tensor want = expected.get(name);
    EXPECT_EQ(t.dtype(), dtypes.count(name) ? dtypes.at(name) : kFloat32) << name;
    EXPECT_EQ(t.shape(), want.shape()) << name;
    EXPECT_EQ(t.to_vector<double>(), want.to_vector<double>()) << name;
  }

  // torch's names are the module's; "pixels" and "scale" are extra.
  Net net;
  expect_error([&] { nn::load(net, file); }, {"load_state_dict", "unexpected keys: pixels, scale"});
  nn::load(net, file, /*strict=*/false);
  for (const auto& [name, t] : net.state_dict()) expect_same(t, state.at(name), name);
}

// The bytes after a safetensors file's header: its tensors' data.
std::string data_section(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), sizeof header);
  return bytes.substr(8 + header);
}

TEST_F(Serialize, SixteenBitFilesMatchPyTorchBothWays) {
  const std::string file = kFixtures + "/torch_written_half.safetensors";
  const StateDict state = nn::load_safetensors(file);
  const auto expected = testutil::Fixture::load("torch_written_half.txt");
  ASSERT_EQ(state.size(), expected.names().size());
  for (const auto& [name, t] : state) {
    SCOPED_TRACE(name);
    const bool bf16 = name.ends_with(".bf16");
    ASSERT_EQ(t.dtype(), bf16 ? kBFloat16 : kFloat16);
    const Tensor want = expected.get(name);
    EXPECT_EQ(t.shape(), want.shape());
    std::vector<int64_t> bits;
    if (bf16) {
      for (bfloat16 v : t.to_vector<bfloat16>()) bits.push_back(v.bits);
    } else {
      for (float16 v : t.to_vector<float16>()) bits.push_back(v.bits);
    }
    EXPECT_EQ(bits, want.to_vector<int64_t>());
  }
  // Written back, the tensors' bytes are PyTorch's (both files keep their data in name order).
  const std::string mine = path("half.safetensors");
  nn::save_safetensors(state, mine);
  EXPECT_EQ(data_section(mine), data_section(file));
  // A 16-bit file loads into a float32 module: load_state_dict converts, as PyTorch's copy_ does.
  nn::Linear fc(5, 3, /*bias=*/false);  // weight [3, 5]
  fc.load_state_dict({{"weight", state.at("values.bf16")}});
  EXPECT_EQ(fc.weight.dtype(), kFloat32);
  EXPECT_EQ(fc.weight.to_vector<double>(), state.at("values.bf16").to_vector<double>());
}

TEST_F(Serialize, LoadingIntoADifferentModuleNamesTheKeys) {
  struct Other : nn::Module {
    nn::Linear fc{4, 3}, head{3, 2};
    Other() {
      register_module("fc", fc);
      register_module("head", head);
    }
  };
  Net net;
  const std::string file = path("net.safetensors");
  nn::save(net, file);
  Other other;
  expect_error([&] { nn::load(other, file); },
               {"missing keys: head.bias, head.weight",
                "unexpected keys: bn.bias, bn.num_batches_tracked, bn.running_mean, bn.running_var, bn.weight"});
}

// A BERT-like checkpoint of another library: its keys prefixed "bert.", its embeddings under
// another name, a pooler and a head the model has no place for, and tensors in bfloat16, float16
// and float64 (ember's own save writes them, as the safetensors package would).
struct Encoder : nn::Module {
  nn::Embedding tokens{8, 4};
  nn::Linear proj{4, 3};
  Encoder() {
    register_module("tokens", tokens);
    register_module("proj", proj);
  }
};

StateDict bert_like_checkpoint() {
  manual_seed(21);
  return {{"bert.embeddings.word_embeddings.weight", randn({8, 4}).to(kBFloat16)},
          {"bert.proj.weight", randn({3, 4}).to(kFloat16)},
          {"bert.proj.bias", randn({3}, kFloat64)},
          {"bert.pooler.dense.weight", randn({4, 4})},
          {"cls.predictions.bias", randn({8})}};
}

nn::KeyMap bert_key_map() {
  nn::KeyMap map;
  map.rename_prefix("bert.", "")
      .rename([](const std::string& key) {
        const std::string from = "embeddings.word_embeddings.";
        return key.starts_with(from) ? "tokens." + key.substr(from.size()) : key;
      })
      .drop_prefix("cls.")
      .drop_if([](const std::string& key) { return key.find("pooler") != std::string::npos; });
  return map;
}

TEST_F(Serialize, KeyMapLoadsAnotherLibrarysCheckpointConvertingDtypes) {
  const std::string file = path("bert.safetensors");
  nn::save_safetensors(bert_like_checkpoint(), file);
  const StateDict state = nn::load_safetensors(file);
  EXPECT_EQ(state.at("bert.embeddings.word_embeddings.weight").dtype(), kBFloat16);

  const nn::KeyMap map = bert_key_map();
  EXPECT_EQ(map.map("bert.proj.weight"), "proj.weight");
  EXPECT_EQ(map.map("bert.embeddings.word_embeddings.weight"), "tokens.weight");
  EXPECT_EQ(map.map("bert.pooler.dense.weight"), std::nullopt);
  EXPECT_EQ(map.map("cls.predictions.bias"), std::nullopt);
  Encoder model;
  const Tensor handle = model.tokens.weight;
  const nn::LoadResult result = nn::load_state_dict(model, state, map);
  EXPECT_TRUE(result.missing_keys.empty());
  EXPECT_TRUE(result.unexpected_keys.empty());
  EXPECT_TRUE(handle.is_same(model.tokens.weight));
  for (const auto& [key, from] : std::vector<std::pair<std::string, std::string>>{
           {"tokens.weight", "bert.embeddings.word_embeddings.weight"},
           {"proj.weight", "bert.proj.weight"},
           {"proj.bias", "bert.proj.bias"}}) {
    SCOPED_TRACE(key);
    const Tensor loaded = model.state_dict().at(key);
    EXPECT_EQ(loaded.dtype(), kFloat32);  // converted on load, as PyTorch's copy_ converts
    // 16-bit values are exact in float32; the float64 bias rounds once.
    EXPECT_EQ(loaded.to_vector<double>(), state.at(from).to(kFloat32).to_vector<double>());
  }
}

TEST_F(Serialize, KeyMapErrorsNameTheKeys) {
  const StateDict state = bert_like_checkpoint();
  Encoder model;
  // Strict: a key the map leaves without a place is named as the checkpoint has it.
  nn::KeyMap keeps_pooler;
  keeps_pooler.rename_prefix("bert.", "").drop_prefix("cls.");
  expect_error([&] { nn::load_state_dict(model, state, keeps_pooler); },
               {"[Encoder] load_state_dict through a KeyMap failed: the map left keys with no place in the module: "
                "bert.embeddings.word_embeddings.weight (as embeddings.word_embeddings.weight), "
                "bert.pooler.dense.weight (as pooler.dense.weight); drop them"});
  // Not strict: they are reported as PyTorch reports them, and the rest loads.
  const nn::LoadResult result = nn::load_state_dict(model, state, keeps_pooler, /*strict=*/false);
  EXPECT_EQ(result.missing_keys, (std::vector<std::string>{"tokens.weight"}));
  EXPECT_EQ(result.unexpected_keys,
            (std::vector<std::string>{"embeddings.word_embeddings.weight", "pooler.dense.weight"}));
  EXPECT_EQ(model.proj.bias.to_vector<double>(), state.at("bert.proj.bias").to(kFloat32).to_vector<double>());

  nn::KeyMap merges;
  merges.rename([](const std::string& key) { return key.substr(key.rfind('.') + 1); });
  expect_error([&] { merges.apply(state); },
               {"[KeyMap] the keys 'bert.embeddings.word_embeddings.weight' and 'bert.pooler.dense.weight' both map to "
                "'weight'; drop one of them or rename them apart"});
  StateDict with_hole = state;
  with_hole["bert.proj.bias"] = Tensor();
  expect_error([&] { bert_key_map().apply(with_hole); }, {"[KeyMap] the checkpoint's tensor 'bert.proj.bias' is undefined"});
  // A dropped key may be undefined: it is never loaded.
  with_hole["bert.pooler.dense.weight"] = Tensor();
  with_hole["bert.proj.bias"] = state.at("bert.proj.bias");
  EXPECT_EQ(bert_key_map().apply(with_hole).size(), 3u);
  nn::KeyMap empty_name;
  empty_name.rename([](const std::string&) { return std::string(); });
  expect_error([&] { empty_name.apply(state); },
               {"[KeyMap] rename turned the key 'bert.embeddings.word_embeddings.weight' into an empty name"});
  expect_error([] { nn::KeyMap().drop_prefix(""); },
               {"[KeyMap] drop_prefix needs a prefix; an empty one would drop every key"});
}

TEST_F(Serialize, BadFilesFailWithClearErrors) {
  const std::string entry_a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  struct Case {
    const char* name;
    std::string bytes;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"empty", "", "the file is 0 bytes, too short for the 8-byte header size"},
      {"short", std::string("\x05\0\0\0\0", 5), "the file is 5 bytes"},
      {"header_too_large", raw(uint64_t{1000}) + "{}",
       "the header size 1000 is larger than the rest of the file (2 bytes)"},
      {"header_size_huge", raw(~uint64_t{0}) + "{}", "is larger than the rest of the file"},
      {"truncated_json", safetensors_bytes(R"({"a":[1,2})"),
       "not valid JSON: invalid JSON at byte 9: expected ',' or ']'"},
      {"fraction", safetensors_bytes(R"({"a":1.5})"), "only integers are supported"},
      {"literal", safetensors_bytes(R"({"a":null})"), "true, false and null are not supported"},
      {"not_utf8", safetensors_bytes("{\"\xFF\":{}}"), "invalid UTF-8"},
      {"not_an_object", safetensors_bytes("[1]"), "the header must be a JSON object, found a(n) array"},
      {"entry_not_an_object", safetensors_bytes(R"({"a":[0]})"), "tensor 'a' must be an object"},
      {"unknown_dtype", safetensors_bytes(R"({"a":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})", eight),
       "tensor 'a' has unknown dtype 'F8_E4M3' (ember reads F32, F64, BF16, F16, I64 and U8)"},
      {"shape_offset_mismatch", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
       "tensor 'a' of shape [3] and dtype F32 needs 12 bytes, but its data_offsets [0, 8) hold 8"},
      {"past_the_end", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight),
       "tensor 'a' has data_offsets [0, 16) past the end of the data section (8 bytes)"},
      {"reversed_offsets", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight),
       "end before they begin"},
      {"overlap",
       safetensors_bytes("{" + entry_a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", eight + "1234"),
       "tensor 'b' at bytes [4, 12) overlaps tensor 'a' at [0, 8)"},
      {"gap",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         eight + "1234"),
       "bytes [4, 8) of the data section belong to no tensor (the next is 'b')"},
      {"first_not_at_zero", safetensors_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})", eight),
       "bytes [0, 4) of the data section belong to no tensor"},
      {"trailing_data", safetensors_bytes("{" + entry_a + "}", eight + "1234"),
       "the data section has 12 bytes but the tensors cover only 8"},
      {"duplicate_key", safetensors_bytes("{" + entry_a + "," + entry_a + "}", eight), "duplicate key \"a\""},
      {"negative_dim", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "tensor 'a': 'shape' must not be negative, found -2"},
      {"huge_shape",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", eight),
       "too large to address"},
      // Holds no element, but its strides (2^64 elements for dim 0) cannot be addressed.
      {"zero_dim_before_huge_dims",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})"),
       "tensor 'a' has a shape [0, 4294967296, 4294967296] too large to address"},
      {"missing_field", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2]}})", eight),
       "tensor 'a' has no 'data_offsets'"},
      {"unknown_field",
       safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"offset":0}})", eight),
       "tensor 'a' has an unknown field 'offset'"},
      {"three_offsets", safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", eight),
       "'data_offsets' must be [begin, end]"},
      {"bad_metadata", safetensors_bytes(R"({"__metadata__":{"epoch":3}})"),
       "'__metadata__' must map strings to strings, but 'epoch' is a(n) integer"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string file = write(std::string(c.name) + ".safetensors", c.bytes);
    expect_error([&] { nn::load_safetensors(file); }, {"[load_safetensors] " + file + ": ", c.error});
  }

  expect_error([&] { nn::load_safetensors(path("missing.safetensors")); },
               {"[load_safetensors] " + path("missing.safetensors") + ": no such file"});
  expect_error([&] { nn::load_safetensors(temp_.dir().string()); }, {"not a regular file"});
  Net net;
  expect_error([&] { nn::load(net, path("missing.safetensors")); }, {"no such file"});
}

// XXH3-64 with seed 0, as the xxHash specification's test vectors give it.
TEST(Checksum, IsXxh3Of64Bits) {
  EXPECT_EQ(nn::checksum_hex(nn::checksum("", 0)), "2d06800538d394c2");
  EXPECT_EQ(nn::checksum_hex(0x00000000000000ffULL), "00000000000000ff");
}

TEST_F(Serialize, AFlippedByteInAnyTensorFailsItsChecksumNamingTheTensor) {
  const StateDict state = check_state();
  const std::string file = path("checked.safetensors");
  nn::save_safetensors(state, file, kCheckMetadata);
  Metadata metadata;
  nn::load_safetensors(file, &metadata);
  EXPECT_EQ(metadata, kCheckMetadata);  // the checksum keys are ember's, not the caller's
  const std::string good = read(file);
  uint64_t header_size = 0;
  std::memcpy(&header_size, good.data(), 8);
  const json::Value header = json::parse(good.substr(8, header_size));
  int flipped = 0;
  for (size_t i = 0; i < header.keys.size(); ++i) {
    if (header.keys[i] == "__metadata__") continue;
    const json::Value* offsets = header.items[i].find("data_offsets");
    ASSERT_NE(offsets, nullptr);
    const auto begin = static_cast<size_t>(offsets->items[0].integer);
    const auto end = static_cast<size_t>(offsets->items[1].integer);
    if (begin == end) continue;  // an empty tensor has no byte to flip
    std::string bad = good;
    bad[8 + header_size + (begin + end) / 2] ^= 0x10;
    const std::string corrupted = write("corrupted.safetensors", bad);
    expect_error([&] { nn::load_safetensors(corrupted); },
                 {"[load_safetensors] " + corrupted, "tensor '" + header.keys[i] + "' fails its checksum",
                  "the file is corrupted"});
    ++flipped;
  }
  EXPECT_EQ(flipped, 7);  // every tensor of check_state() but the empty one
}

TEST_F(Serialize, ChecksumKeysAreReservedAndMustNameATensor) {
  expect_error([&] { nn::save_safetensors(numbered_state(1), path("x.safetensors"), {{"ember.xxh3_64.w", "0"}}); },
               {"the metadata key 'ember.xxh3_64.w' is reserved for ember's checksums"});
  const std::string entry_a = R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  const std::string orphan =
      write("orphan.safetensors",
            safetensors_bytes(R"({"__metadata__":{"ember.xxh3_64.b":"0000000000000000"},)" + entry_a + "}", "x"));
  expect_error([&] { nn::load_safetensors(orphan); },
               {"the metadata holds a checksum for tensor 'b', which the file does not have"});
  // A file without checksums (another writer's) loads unchecked.
  const std::string plain = write("plain.safetensors", safetensors_bytes("{" + entry_a + "}", "x"));
  EXPECT_EQ(bytes_of(nn::load_safetensors(plain).at("a")), "x");
}

// A damaged checksum key must not switch its tensor's check off: a file that records checksums
// records one for every tensor, and a file that must carry them (a training checkpoint) carries
// them all (Note [Tensor checksums]).
TEST_F(Serialize, ADamagedOrMissingChecksumKeyIsRefused) {
  const std::string file = path("two.safetensors");
  nn::save_safetensors(numbered_state(2), file);
  const StateDict state = nn::load_safetensors(file, nullptr, nn::Checksums::Required);
  ASSERT_EQ(state.size(), 2u);
  const std::string good = read(file);
  const std::string name = state.begin()->first, key = std::string(nn::kChecksumPrefix) + name;
  const size_t at = good.find(key);
  ASSERT_NE(at, std::string::npos);
  std::string flipped = good;
  flipped[at + 7] ^= 0x01;  // "ember.xxh3_64.<name>" becomes another metadata key
  const std::string damaged = write("damaged.safetensors", flipped);
  expect_error([&] { nn::load_safetensors(damaged); },
               {"[load_safetensors] " + damaged, "tensor '" + name + "' has no checksum",
                "while the file records them for its other tensors: the file is damaged or was altered"});
  const std::string entry_a = R"("a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  const std::string plain = write("plain.safetensors", safetensors_bytes("{" + entry_a + "}", "x"));
  expect_error([&] { nn::load_safetensors(plain, nullptr, nn::Checksums::Required); },
               {"tensor 'a' has no checksum (no metadata key 'ember.xxh3_64.a'), and this file must record one for "
                "every tensor"});
  expect_error([&] { nn::load_safetensors(plain, nullptr, static_cast<nn::Checksums>(7)); },
               {"[load_safetensors] unknown Checksums 7 (expected 0 to 1)"});
}

TEST_F(Serialize, APathThatCannotBeExaminedSaysSo) {
  const std::string loop = path("loop.safetensors");
  fs::create_symlink(loop, loop);
  expect_error([&] { nn::load_safetensors(loop); }, {"cannot be examined", "Too many levels of symbolic links"});
}

// Note [Stale temporary files]: a killed saver's file goes; a live saver's (locked) file stays.
TEST_F(Serialize, ASaveRemovesTheTemporaryFilesOfKilledSaversOnly) {
  const std::string target = path("model.safetensors");
  const std::string stale = write("model.safetensors.tmp-0123456789abcdef", "half a file");
  const std::string live = write("model.safetensors.tmp-fedcba9876543210", "being written");
  const std::string other = write("model.safetensors.tmp-notours", "not a temporary name");
  const std::string neighbour = write("other.safetensors.tmp-0123456789abcdef", "another target's");
  const int fd = ::open(live.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  nn::save_safetensors(numbered_state(1), target);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(neighbour));
  ::close(fd);
  nn::save_safetensors(numbered_state(1), target);
  EXPECT_FALSE(fs::exists(live));  // its saver has gone: the lock is free
  EXPECT_EQ(nn::load_safetensors(target).size(), 2u);
}

TEST_F(Serialize, HeaderOrderDoesNotHaveToMatchDataOrder) {
  // As PyTorch's writer does: header keys sorted by name, data sorted by element width.
  const std::string file = write("reordered.safetensors",
                                 safetensors_bytes(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[8,10]},)"
                                                   R"("b":{"dtype":"F64","shape":[],"data_offsets":[0,8]}})",
                                                   raw(2.5) + "\x07\x09"));
  const StateDict state = nn::load_safetensors(file);
  EXPECT_EQ(state.at("a").to_vector<double>(), (std::vector<double>{7, 9}));
  EXPECT_EQ(state.at("b").item(), 2.5);
}

TEST_F(Serialize, SaveRejectsWhatCannotBeWritten) {
  expect_error([&] { nn::save_safetensors({{"__metadata__", ones({1})}}, path("x")); }, {"is reserved for metadata"});
  expect_error([&] { nn::save_safetensors({{"w", Tensor()}}, path("x")); }, {"tensor 'w' is undefined"});
  expect_error([&] { nn::save_safetensors({{"bad\xFF", ones({1})}}, path("x")); }, {"not valid UTF-8"});
  const std::string nowhere = path("no/such/dir/x.safetensors");
  expect_error([&] { nn::save_safetensors({{"w", ones({1})}}, nowhere); },
               {"[save_safetensors] " + nowhere + ": cannot open", "No such file or directory"});
  EXPECT_FALSE(fs::exists(path("x")));
}

namespace {
mode_t permissions(const std::string& file) {
  struct stat st {};
  EXPECT_EQ(::stat(file.c_str(), &st), 0) << file;
  return st.st_mode & 07777;
}


// The file must be exactly one of the numbered states.
void expect_one_whole_state(const std::string& file, int count) {
  const StateDict back = nn::load_safetensors(file);
  const int k = static_cast<int>(back.at("k").item());
  ASSERT_TRUE(k >= 0 && k < count) << k;
  const StateDict want = numbered_state(k);
  ASSERT_EQ(keys(back), keys(want));
  for (const auto& [name, t] : want) expect_same(back.at(name), t, name);
}
}  // namespace

TEST_F(Serialize, SaveKeepsTheTargetsPermissionsOrGivesANewFileTheDefault) {
  const std::string fresh = path("fresh.safetensors");
  nn::save_safetensors(numbered_state(1), fresh);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  EXPECT_EQ(permissions(fresh), 0666 & ~mask);  // the temporary file's name is random, its mode is not

  const std::string kept = path("kept.safetensors");
  write("kept.safetensors", "old");
  fs::permissions(kept, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  nn::save_safetensors(numbered_state(2), kept);
  EXPECT_EQ(permissions(kept), 0640);
  expect_one_whole_state(kept, 3);
}

TEST_F(Serialize, AFailedSaveRemovesItsTemporaryFileAndNamesTheReason) {
  // The rename fails: the target is a folder that holds a file.
  const std::string target = path("folder.safetensors");
  fs::create_directories(target);
  write("folder.safetensors/inside", "x");
  expect_error([&] { nn::save_safetensors(numbered_state(1), target); },
               {"[save_safetensors] " + target + ": cannot rename", "Is a directory"});
  EXPECT_EQ(temp_files(), std::vector<std::string>{});
  EXPECT_TRUE(fs::is_directory(target));
  // check_can_save sees it coming, before any work is done, and leaves nothing behind either.
  expect_error([&] { utils::check_can_save(target, "fit"); }, {"[fit] " + target + ": is a folder"});
  expect_error([&] { utils::check_can_save(path("no/such/dir/x"), "fit"); }, {"No such file or directory"});
  utils::check_can_save(path("fine.safetensors"), "fit");
  EXPECT_FALSE(fs::exists(path("fine.safetensors")));
  EXPECT_EQ(temp_files(), std::vector<std::string>{});
}

TEST_F(Serialize, AnInterruptedSaveLeavesTheTargetWhole) {
  const std::string file = path("model.safetensors");
  nn::save_safetensors(numbered_state(1), file);
  // A child process starts a save, writes part of it and dies without cleaning up, as a killed
  // process would (_exit runs no destructors).
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      utils::AtomicFile out(file, "save_safetensors");
      out.write("partial bytes", 13);
      _exit(0);
    } catch (const Error&) {
      _exit(1);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  const std::vector<std::string> stray = temp_files();
  ASSERT_EQ(stray.size(), 1u);  // the dead save's leftover...
  EXPECT_EQ(read(stray[0]), "partial bytes");
  expect_one_whole_state(file, 2);  // ...beside the old file, intact
  EXPECT_EQ(nn::load_safetensors(file).at("k").item(), 1.0);

  // The next save removes the leftover: its saver is dead, so its lock is free
  // (Note [Stale temporary files]).
  nn::save_safetensors(numbered_state(2), file);
  EXPECT_EQ(nn::load_safetensors(file).at("k").item(), 2.0);
  EXPECT_EQ(temp_files(), std::vector<std::string>{});
}

TEST_F(Serialize, ConcurrentSavesLeaveOneWholeFile) {
  const std::string file = path("shared.safetensors");
  constexpr int kSavers = 8, kSaves = 20;
  // Half the savers are threads of this process, half are other processes (forked before the
  // threads start). The states are made first: a forked child only writes files.
  std::vector<StateDict> states;
  for (int k = 0; k < kSavers; ++k) states.push_back(numbered_state(k));
  std::vector<pid_t> children;
  for (int k = 0; k < kSavers / 2; ++k) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      try {
        for (int i = 0; i < kSaves; ++i) nn::save_safetensors(states[static_cast<size_t>(k)], file);
      } catch (const Error&) {
        _exit(1);
      }
      _exit(0);
    }
    children.push_back(child);
  }
  std::vector<std::thread> threads;
  for (int k = kSavers / 2; k < kSavers; ++k)
    threads.emplace_back([&file, &states, k] {
      for (int i = 0; i < kSaves; ++i) nn::save_safetensors(states[static_cast<size_t>(k)], file);
    });
  for (auto& t : threads) t.join();
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a saving process failed";
  }
  expect_one_whole_state(file, kSavers);
  EXPECT_EQ(temp_files(), std::vector<std::string>{});
}

TEST(Json, ParsesTheSubset) {
  const json::Value v = json::parse(
      " {\"s\": \"q\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00fc\\ud83d\\ude00\xC3\xA9\", "
      "\"n\": [0, -12, 9223372036854775807, -9223372036854775808], \"o\": {}, \"a\": []}\n ");
  ASSERT_EQ(v.kind, json::Value::Kind::Object);
  EXPECT_EQ(v.keys, (std::vector<std::string>{"s", "n", "o", "a"}));
  EXPECT_EQ(v.find("s")->string, "q\"\\/\b\f\n\r\t\xC3\xBC\xF0\x9F\x98\x80\xC3\xA9");
  const auto& n = v.find("n")->items;
  ASSERT_EQ(n.size(), 4u);
  EXPECT_EQ(n[1].integer, -12);
  EXPECT_EQ(n[2].integer, INT64_MAX);
  EXPECT_EQ(n[3].integer, INT64_MIN);
  EXPECT_EQ(v.find("missing"), nullptr);
  // quote() writes what parse() reads back.
  const std::string text = "tab\t \"q\" \\ \x01 \xE2\x82\xAC";
  EXPECT_EQ(json::parse(json::quote(text)).string, text);
}

TEST(Json, RejectsEverythingElse) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "expected a value, found end of input"},
      {"{} x", "unexpected 'x' after the JSON value"},
      {"[1,]", "expected a value, found ']'"},
      {"{\"a\" 1}", "expected ':'"},
      {"{1:2}", "expected a string key"},
      {"01", "leading zeros"},
      {"-", "expected a digit"},
      {"1e5", "only integers"},
      {"9223372036854775808", "out of the 64-bit range"},
      {"-9223372036854775809", "out of the 64-bit range"},
      {"true", "not supported"},
      {"\"abc", "unterminated string"},
      {"\"a\nb\"", "control character byte 0x0A must be escaped"},
      {"\"\\x\"", "invalid escape: 'x' after a backslash"},
      {"\"\\u12g4\"", "expected a hex digit"},
      {"\"\\ud83d\"", "unpaired high surrogate"},
      {"\"\\ude00\"", "unpaired low surrogate"},
      {"\"\xC0\xAF\"", "invalid UTF-8"},      // overlong '/'
      {"\"\xED\xA0\x80\"", "invalid UTF-8"},  // an encoded surrogate
      {"{\"a\":1,\"a\":2}", "duplicate key \"a\""},
      {std::string(100, '['), "nested deeper than 64 levels"},
  };
  for (const auto& [text, error] : cases) {
    SCOPED_TRACE(text);
    expect_error([&] { json::parse(text); }, {"invalid JSON at byte", error});
  }
}

// What nlohmann's reader accepts or words its own way, and the strict wrapper must not
// (Note [JSON subset]): a byte-order mark, comments, numbers beyond 64 bits read as doubles,
// and errors in the middle of a document, each at the byte where it was found.
TEST(Json, StrictOverNlohmann) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\xEF\xBB\xBF{}", "invalid JSON at byte 0: expected a value, found byte 0xEF"},
      {"/* c */ {}", "invalid JSON at byte 0: expected a value, found '/'"},
      {"[1] // c", "invalid JSON at byte 4: unexpected '/' after the JSON value"},
      {"{} true", "invalid JSON at byte 3: unexpected 't' after the JSON value"},
      {"[tru]", "true, false and null are not supported"},
      {"[0,01]", "invalid JSON at byte 3: numbers may not have leading zeros"},
      {"18446744073709551616", "integer out of the 64-bit range"},
      {"[1E400]", "only integers are supported, found a fraction or exponent"},  // too large for a double
      {std::string(400, '9'), "integer out of the 64-bit range"},
      {"[1.]", "only integers are supported, found a fraction or exponent"},
      {"{\"a\":{}} ", "ok"},
      {"[\"a\" \"b\"]", "invalid JSON at byte 5: expected ',' or ']' in an array, found '\"'"},
      {"{\"a\":1 2}", "invalid JSON at byte 7: expected ',' or '}' in an object, found '2'"},
  };
  for (const auto& [text, error] : cases) {
    SCOPED_TRACE(text);
    if (error == "ok") {
      EXPECT_EQ(json::parse(text).kind, json::Value::Kind::Object);
      continue;
    }
    expect_error([&] { json::parse(text); }, {"invalid JSON at byte", error});
  }
  // 64 levels of nesting are allowed, a value at level 65 is not.
  EXPECT_EQ(json::parse(std::string(65, '[') + std::string(65, ']')).kind, json::Value::Kind::Array);
  expect_error([&] { json::parse(std::string(65, '[') + "1" + std::string(65, ']')); },
               {"invalid JSON at byte", "nested deeper than 64 levels"});
}
