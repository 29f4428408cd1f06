// The memory history (Note [Memory history] in core/memory_history.h): nothing recorded when off;
// allocations and frees with their changes, live bytes, op, phase and module; the ring keeping
// the last events; a refused request recorded, marked failed. And the memory snapshot
// (utils/memory_snapshot.h): its JSON read back, its SVG's mark of the failure, a folder it
// cannot make named.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/memory_history.h"
#include "core/memory_limit.h"
#include "core/ops.h"
#include "core/out_of_memory.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "test_helpers.h"
#include "tests/temp_dir.h"
#include "tests/two_layers.h"
#include "utils/memory_snapshot.h"

using namespace ember;
using testutil::expect_error;
using testutil::TwoLayers;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Every test leaves the history off and the CPU without a limit, however it ends.
class MemoryHistory : public ::testing::Test {
 protected:
  void TearDown() override {
    memory::record_history(false);
    memory::clear_limit(kCPU);
  }
};

bool any_event(const std::vector<memory::HistoryEvent>& events,
               const std::function<bool(const memory::HistoryEvent&)>& pred) {
  return std::any_of(events.begin(), events.end(), pred);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(MemoryHistory, OffRecordsNothing) {
  memory::record_history(true);
  memory::record_history(false);
  EXPECT_FALSE(memory::recording_history());
  { const Tensor t = empty({1024}); }
  EXPECT_TRUE(memory::history(kCPU).empty());
}

TEST_F(MemoryHistory, RecordsAllocationsAndFreesWithTheLiveBytes) {
  const int64_t live = memory::stats().live_bytes;
  memory::record_history(true);
  EXPECT_TRUE(memory::recording_history());
  Tensor a = empty({1024});
  const Tensor b = empty({2048});
  a = Tensor();
  const std::vector<memory::HistoryEvent> h = memory::history(kCPU);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].delta_bytes, 4096);
  EXPECT_EQ(h[0].live_bytes, live + 4096);
  EXPECT_EQ(h[1].delta_bytes, 8192);
  EXPECT_EQ(h[1].live_bytes, live + 4096 + 8192);
  EXPECT_EQ(h[2].delta_bytes, -4096);
  EXPECT_EQ(h[2].live_bytes, live + 8192);
  for (size_t i = 0; i < h.size(); ++i) {
    EXPECT_EQ(h[i].device, kCPU);
    EXPECT_FALSE(h[i].failed);
    EXPECT_EQ(h[i].op, "");  // factories are no ops
    EXPECT_GE(h[i].time_ms, i ? h[i - 1].time_ms : 0.0);
  }
  // Stopping keeps the events; starting again drops them.
  memory::record_history(false);
  EXPECT_EQ(memory::history(kCPU).size(), 3u);
  memory::record_history(true);
  EXPECT_TRUE(memory::history(kCPU).empty());
}

TEST_F(MemoryHistory, EventsNameTheOpAndThePhase) {
  const Tensor a = randn({64, 32}).requires_grad_(), b = randn({32, 16});
  memory::record_history(true);
  const Tensor loss = sum(matmul(a, b));
  loss.backward();
  const std::vector<memory::HistoryEvent> h = memory::history(kCPU);
  // The matmul's [64, 16] output in the forward, and a's [64, 32] gradient in the backward.
  EXPECT_TRUE(any_event(h, [](const auto& e) {
    return e.op == "matmul" && e.phase == "forward" && e.delta_bytes == 64 * 16 * 4;
  }));
  EXPECT_TRUE(any_event(h, [](const auto& e) { return e.phase == "backward" && e.delta_bytes == 64 * 32 * 4; }));
}

TEST_F(MemoryHistory, EventsInsideAModuleNameItsPath) {
  TwoLayers net;
  const Tensor x = randn({256, 64});
  memory::record_history(true);
  const Tensor y = net(x);
  const std::vector<memory::HistoryEvent> h = memory::history(kCPU);
  EXPECT_TRUE(any_event(h, [](const auto& e) { return e.module == "fc1" && e.op == "matmul"; }));
  EXPECT_TRUE(
      any_event(h, [](const auto& e) { return e.module == "fc2" && e.op == "matmul" && e.delta_bytes == 4 * kMiB; }));
}

TEST_F(MemoryHistory, TheRingKeepsTheLastEvents) {
  memory::record_history(true, 3);
  std::vector<Tensor> kept;
  for (int64_t k = 1; k <= 5; ++k) kept.push_back(empty({k * 256}));  // k KiB
  const std::vector<memory::HistoryEvent> h = memory::history(kCPU);
  ASSERT_EQ(h.size(), 3u);
  for (size_t i = 0; i < h.size(); ++i) EXPECT_EQ(h[i].delta_bytes, static_cast<int64_t>(3 + i) * 1024);
  expect_error([] { memory::record_history(true, 0); }, "[memory::record_history] max_events must be positive, got 0");
}

TEST_F(MemoryHistory, ARefusedRequestIsTheLastEventMarkedFailed) {
  memory::empty_cache();
  const int64_t live = memory::stats().live_bytes;
  memory::set_limit(kCPU, memory::stats().reserved_bytes + kMiB);  // room for 1 MiB of fresh blocks
  memory::record_history(true);
  EXPECT_THROW(empty({kMiB}), OutOfMemoryError);  // 4 MiB
  const std::vector<memory::HistoryEvent> h = memory::history(kCPU);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_TRUE(h.back().failed);
  EXPECT_EQ(h.back().delta_bytes, 4 * kMiB);
  EXPECT_EQ(h.back().live_bytes, live);  // a refused request changes nothing
}

TEST_F(MemoryHistory, TheSnapshotEndsAtTheFailureAndNamesIt) {
  ember::testing::TempDir tmp;
  TwoLayers net;
  const Tensor x = randn({256, 64});
  memory::empty_cache();
  const int64_t limit = memory::stats().reserved_bytes + kMiB;  // room for 1 MiB of fresh blocks
  memory::set_limit(kCPU, limit);
  memory::record_history(true);
  std::string message;
  try {
    net(x);
    ADD_FAILURE() << "fc2's 4 MiB output fitted in 1 MiB of fresh blocks";
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  // The JSON keeps the whole message, quotes and all; the picture its first line.
  const std::string error = message + "\nand a second line with \"quotes\" and a \\";
  const std::string dir = tmp.path("snapshots/nested");
  const utils::MemorySnapshotFiles files = utils::write_memory_snapshot(dir, kCPU, error);
  EXPECT_EQ(files.json, dir + "/memory_snapshot.json");
  EXPECT_EQ(files.svg, dir + "/memory_snapshot.svg");

  // The frees after the failure are fc1's and the relu's outputs, freed as the error unwound.
  const std::vector<memory::HistoryEvent> h = memory::history(kCPU);
  size_t after = 0;
  while (after < h.size() && !h[h.size() - 1 - after].failed) ++after;
  ASSERT_LT(after, h.size());
  EXPECT_GE(after, 2u);

  const nlohmann::json snapshot = nlohmann::json::parse(read_file(files.json));
  EXPECT_EQ(snapshot["device"], "cpu");
  EXPECT_EQ(snapshot["error"], error);
  EXPECT_EQ(snapshot["limit_bytes"], limit);
  EXPECT_EQ(snapshot["stats"]["live_bytes"], memory::stats().live_bytes);
  EXPECT_EQ(snapshot["events_after_failure"], after);
  const nlohmann::json& events = snapshot["events"];
  ASSERT_EQ(events.size(), h.size() - after);
  const nlohmann::json& failed = events.back();
  EXPECT_EQ(failed["failed"], true);
  EXPECT_EQ(failed["delta_bytes"], 4 * kMiB);
  EXPECT_EQ(failed["op"], "matmul");
  EXPECT_EQ(failed["module"], "fc2");
  EXPECT_EQ(failed["phase"], "forward");
  EXPECT_EQ(events.front()["failed"], false);

  const std::string svg = read_file(files.svg);
  EXPECT_NE(svg.find("class='refused-request'"), std::string::npos);
  EXPECT_NE(svg.find("refused: 4.00 MiB for matmul (forward, module &apos;fc2&apos;)"), std::string::npos);
  EXPECT_NE(svg.find("does not fit under the limit of"), std::string::npos);  // the caption
  EXPECT_EQ(svg.find("a second line"), std::string::npos);
}

TEST_F(MemoryHistory, ASnapshotWithoutAFailureHoldsEveryEvent) {
  ember::testing::TempDir tmp;
  memory::record_history(true);
  { const Tensor t = empty({1024}); }
  const utils::MemorySnapshotFiles files = utils::write_memory_snapshot(tmp.path("out"), kCPU);
  const nlohmann::json snapshot = nlohmann::json::parse(read_file(files.json));
  EXPECT_EQ(snapshot["events"].size(), 2u);
  EXPECT_EQ(snapshot["events_after_failure"], 0);
  EXPECT_EQ(snapshot["error"], "");
  EXPECT_TRUE(snapshot["limit_bytes"].is_null());
  EXPECT_EQ(read_file(files.svg).find("refused-request"), std::string::npos);
}

TEST_F(MemoryHistory, AFolderThatCannotBeMadeIsNamed) {
  ember::testing::TempDir tmp;
  std::ofstream(tmp.path("plain")) << "a file, not a folder";
  const std::string dir = tmp.path("plain") + "/snapshots";
  expect_error([&] { utils::write_memory_snapshot(dir, kCPU); },
               "[write_memory_snapshot] cannot make the folder '" + dir + "'");
}

}  // namespace
