#include "examples/training_checkpoint.h"

#include <cmath>
#include <functional>
#include <type_traits>

#include "core/convert.h"
#include "core/generator.h"

namespace ember::examples {

namespace {

constexpr const char* kFormat = "ember training checkpoint 3";  // 2: progress.test_loss; 3: amp, scaler.
constexpr const char* kCsvRows = "csv_rows";
constexpr const char* kParts[] = {"model.", "optim.", "sched.", "scaler.", "rng.", "progress."};

bool scales(const TrainingState& s) { return s.scaler && s.scaler->is_enabled(); }

void put(nn::StateDict& out, const std::string& prefix, const nn::StateDict& part) {
  for (const auto& [key, value] : part) out.emplace(prefix + key, value);
}

// The entries of `all` under `prefix`, without it.
nn::StateDict part(const nn::StateDict& all, const std::string& prefix) {
  nn::StateDict out;
  for (const auto& [key, value] : all)
    if (key.starts_with(prefix)) out.emplace(key.substr(prefix.size()), value);
  return out;
}

// What a checkpoint says about the objects it was saved from, with what the caller must match.
nn::Metadata identity(const TrainingState& s, const nn::Metadata& run) {
  nn::Metadata m = run;
  m["format"] = kFormat;
  m["model"] = s.model.name();
  m["optimizer"] = s.optimizer.name();
  m["scheduler"] = s.scheduler ? "yes" : "none";
  m["scaler"] = scales(s) ? "yes" : "none";
  return m;
}

// Runs `load`, naming the checkpoint in any error it raises.
void loading(const std::string& path, const std::function<void()>& load) {
  try {
    load();
  } catch (const Error& e) {
    EMBER_FAIL("[resume] ", path, ": ", e.message());
  }
}

std::vector<std::pair<Device, GeneratorState>> rng_states(const nn::StateDict& rng) {
  std::vector<std::pair<Device, GeneratorState>> states;
  for (const auto& [device, value] : rng) {
    EMBER_CHECK(value.dtype() == kInt64 && value.shape() == Shape{2}, "'rng.", device,
                "' must be int64 [2] (seed, offset), got ", value.dtype(), " ", shape_str(value.shape()));
    const std::vector<int64_t> v = value.to_vector<int64_t>();
    states.emplace_back(Device(device), GeneratorState{static_cast<uint64_t>(v[0]), static_cast<uint64_t>(v[1])});
  }
  EMBER_CHECK(!states.empty(), "no random generator states (rng.<device>)");
  return states;
}

TrainingProgress progress_of(const nn::StateDict& numbers, const nn::Metadata& metadata) {
  TrainingProgress p;
  TrainingProgress::numbers(p, [&](const char* name, auto& field) {
    const auto it = numbers.find(name);
    EMBER_CHECK(it != numbers.end() && it->second.numel() == 1, "missing or malformed 'progress.", name, "'");
    using Field = std::remove_reference_t<decltype(field)>;
    const double value = it->second.item();
    if constexpr (std::is_integral_v<Field>) {
      // A count stored as a float: it must be a whole number int64 holds, not a saturated guess.
      EMBER_CHECK(fits_in_int64(value) && value == std::trunc(value), "'progress.", name, "' must be a whole number, got ", value);
    }
    field = static_cast<Field>(value);
  });
  EMBER_CHECK(p.epochs >= 1, "'progress.epochs' must be at least 1, got ", p.epochs);
  if (const auto rows = metadata.find(kCsvRows); rows != metadata.end()) p.csv_rows = rows->second;
  return p;
}

}  // namespace

void save_training_checkpoint(const std::string& path, const TrainingState& s, const TrainingProgress& progress,
                              const nn::Metadata& run) {
  nn::StateDict all;
  put(all, "model.", s.model.state_dict());
  put(all, "optim.", s.optimizer.state_dict());
  if (s.scheduler) put(all, "sched.", s.scheduler->state_dict());
  if (scales(s)) put(all, "scaler.", s.scaler->state_dict());
  for (const auto& [device, state] : get_rng_states())
    all.emplace("rng." + device.str(), from_vector(std::vector<int64_t>{static_cast<int64_t>(state.seed),
                                                                        static_cast<int64_t>(state.offset)},
                                                   {2}, kInt64));
  TrainingProgress::numbers(progress, [&](const char* name, const auto& value) {
    const DType dtype = std::is_integral_v<std::remove_cvref_t<decltype(value)>> ? kInt64 : kFloat64;
    all.emplace(std::string("progress.") + name, scalar_tensor(static_cast<double>(value), dtype));
  });
  nn::Metadata metadata = identity(s, run);
  metadata[kCsvRows] = progress.csv_rows;
  nn::save_safetensors(all, path, metadata);
}

TrainingProgress load_training_checkpoint(const std::string& path, const TrainingState& s, const nn::Metadata& run) {
  nn::Metadata saved;
  // ember wrote it, with a checksum for every tensor: one missing is damage (Note [Tensor checksums]).
  const nn::StateDict all = nn::load_safetensors(path, &saved, nn::Checksums::Required);
  EMBER_CHECK(saved.count("format") && saved.at("format") == kFormat, "[resume] ", path,
              ": not an ember training checkpoint (its metadata has no format '", kFormat, "')");
  for (const auto& [key, want] : identity(s, run)) {
    const auto found = saved.find(key);
    EMBER_CHECK(found != saved.end(), "[resume] ", path, ": the checkpoint does not record its ", key);
    EMBER_CHECK(found->second == want, "[resume] ", path, ": the checkpoint's ", key, " is '", found->second,
                "' but this run's is '", want, "'");
  }
  for (const auto& [key, value] : all) {
    bool known = false;
    for (const char* prefix : kParts) known = known || key.starts_with(prefix);
    EMBER_CHECK(known, "[resume] ", path, ": unexpected key '", key,
                "' (expected model., optim., sched., scaler., rng. or progress.)");
  }

  TrainingProgress progress;
  loading(path, [&] {
    progress = progress_of(part(all, "progress."), saved);
    const auto rng = rng_states(part(all, "rng."));
    s.model.load_state_dict(part(all, "model."));
    s.optimizer.load_state_dict(part(all, "optim."));
    if (progress.steps > 0)  // every parameter has stepped, so each must have its whole state
      for (const std::string& key : s.optimizer.missing_state_keys())
        EMBER_FAIL("the optimizer state lacks 'optim.", key, "' after ", progress.steps, " steps");
    if (s.scheduler) s.scheduler->load_state_dict(part(all, "sched."));
    if (scales(s)) s.scaler->load_state_dict(part(all, "scaler."));
    set_rng_states(rng);
    s.train.set_epoch(progress.epochs);
  });
  return progress;
}

}  // namespace ember::examples
