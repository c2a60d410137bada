// The checkpoint file and folder: round trip, checksums catching flipped bytes and truncation,
// the commit protocol's files, the keep policy on disk, falling back past a bad newest file,
// the background writer's errors reaching the training thread, and resume compatibility.
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include "test/unit/test_support.h"
#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_resume.h"
#include "train/checkpoint/checkpoint_store.h"
#include "train/checkpoint/checkpoint_writer.h"
#include "train/checkpoint/write_in_flight.h"
#include "train/comm/comm.h"
#include "train/io/durable_file.h"
#include "train/io/h5.h"

using namespace slurm_train;
using testing::flip_byte;
using testing::TempDir;
namespace fs = std::filesystem;

namespace {

CheckpointState sample_state(std::uint64_t step, const std::string& optimizer = "adamw") {
  CheckpointState s;
  s.model = mlp_model_layout(mlp_layout(MlpShape{6, {4}, 3}));
  const std::size_t n = s.model.parameters();
  s.params.resize(n);
  std::iota(s.params.begin(), s.params.end(), 0.5f * static_cast<float>(step));
  s.first.assign(n, 0.25f);
  if (optimizer == "adamw") s.second.assign(n, 1e-3f);
  s.optimizer = optimizer;
  s.counters.step = step;
  s.counters.epoch = step / 10;
  s.counters.batch_in_epoch = step % 10;
  s.counters.samples_seen = step * 32;
  s.counters.seed = 42;
  s.counters.global_batch = 32;
  s.counters.schedule_total_steps = 100;
  s.counters.next_lr = 1e-3;
  s.counters.epoch_loss_sum = 1.5;
  s.counters.optimizer_steps = step;
  s.counters.world_size = 2;
  s.config_toml = "[train]\nseed = 42\n";
  s.program_version = "test";
  s.created = "2026-01-01T00:00:00Z";
  s.host = "node1";
  s.device = "cuda:0 (NVIDIA H200, bf16)";
  return s;
}

// The file offset of a contiguous dataset's data, to damage exactly its bytes.
haddr_t data_offset(const std::string& path, const std::string& dataset) {
  h5::Handle file = h5::open_file(path, H5F_ACC_RDONLY);
  h5::Handle set = h5::open_dataset(file, dataset, path);
  return H5Dget_offset(set);
}

// sample_state(1) with the layers of `shape`: parameters in a pattern, the moments constant.
CheckpointState state_of_shape(const MlpShape& shape) {
  CheckpointState s = sample_state(1);
  s.model = mlp_model_layout(mlp_layout(shape));
  const std::size_t n = s.model.parameters();
  s.params.resize(n);
  for (std::size_t i = 0; i < n; ++i) s.params[i] = static_cast<float>(i % 1000) * 1e-3f;
  s.first.assign(n, 0.5f);
  s.second.assign(n, 0.25f);
  return s;
}

}  // namespace

TEST_CASE("checkpoint file: everything written reads back bit for bit, SGD and AdamW") {
  TempDir dir;
  for (const char* optimizer : {"adamw", "sgd"}) {
    const std::string path = dir.path + "/" + optimizer + ".h5";
    const CheckpointState s = sample_state(7, optimizer);
    write_checkpoint_file(path, s);
    const CheckpointState r = read_checkpoint_file(path);
    CHECK(r.params == s.params);
    CHECK(r.first == s.first);
    CHECK(r.second == s.second);
    CHECK(r.optimizer == optimizer);
    CHECK(std::memcmp(&r.counters, &s.counters, sizeof r.counters) == 0);
    CHECK(r.config_toml == s.config_toml);
    CHECK(r.host == "node1");
    CHECK(r.device == "cuda:0 (NVIDIA H200, bf16)");
    REQUIRE(r.model.layers.size() == 2);
    CHECK(r.model.layers[1].in == 4);
    CHECK(r.model.layers[1].out == 3);
    CHECK(r.model.layers[1].weight == s.model.layers[1].weight);
    CHECK(verify_checkpoint_file(path).empty());
    const std::string text = describe_checkpoint_file(path);
    CHECK(text.find("/model/layer1.weight") != std::string::npos);
    CHECK(text.find("float32  [4, 6]") != std::string::npos);
  }
}

TEST_CASE("checkpoint file: the model alone (sample's read) keeps no optimizer state but checks its checksums") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  const CheckpointState s = sample_state(5);
  write_checkpoint_file(path, s);
  const CheckpointState r = read_checkpoint_model(path);
  CHECK(r.params == s.params);
  CHECK(r.first.empty());
  CHECK(r.second.empty());
  CHECK(r.optimizer == "adamw");
  CHECK(r.counters.step == 5);
  REQUIRE(r.model.layers.size() == 2);
  flip_byte(path, data_offset(path, "/optimizer/exp_avg_sq/layer1.weight") + 5);
  testing::check_refused<CheckpointError>([&] { read_checkpoint_model(path); },
                                          "/optimizer/exp_avg_sq/layer1.weight: checksum mismatch");
}

TEST_CASE("model file: read as serve reads it, with its recipe, checksums catching a flipped byte") {
  TempDir dir;
  const std::string path = dir.path + "/model.h5";
  const CheckpointState s = sample_state(5);
  ModelRecipe recipe;
  recipe.activation = "gelu";
  recipe.input_scale = 1.0 / 255;
  recipe.mean = 0.25;
  recipe.inv_stddev = 2.5;
  save_model(path, s.model, s.params, s.config_toml, recipe);
  const CheckpointState r = read_model_file(path);
  CHECK(r.params == s.params);
  CHECK(r.model.layers.size() == 2);
  CHECK(r.recipe.activation == "gelu");
  CHECK(r.recipe.mean == 0.25);
  CHECK(r.recipe.inv_stddev == 2.5);
  CHECK(r.config_toml == s.config_toml);
  CHECK(r.counters.step == 0);
  // A checkpoint reads the same way, without its optimizer state.
  write_checkpoint_file(dir.path + "/c.h5", s);
  const CheckpointState c = read_model_file(dir.path + "/c.h5");
  CHECK(c.params == s.params);
  CHECK(c.first.empty());
  CHECK(c.counters.step == 5);
  flip_byte(path, data_offset(path, "/model/layer2.weight") + 3);
  testing::check_refused<CheckpointError>([&] { read_model_file(path); }, "/model/layer2.weight: checksum mismatch");
}

TEST_CASE(
    "checkpoint file: a flipped byte is reported with the file and dataset, a truncation with the file and both "
    "sizes") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  write_checkpoint_file(path, sample_state(3));
  flip_byte(path, data_offset(path, "/optimizer/exp_avg/layer2.bias") + 2);
  const auto problems = verify_checkpoint_file(path);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find(path) != std::string::npos);
  CAPTURE(problems[0]);
  CHECK(problems[0].find("/optimizer/exp_avg/layer2.bias: checksum mismatch") != std::string::npos);
  testing::check_refused<CheckpointError>([&] { read_checkpoint_file(path); }, "exp_avg/layer2.bias");

  const std::string cut = dir.path + "/cut.h5";
  write_checkpoint_file(cut, sample_state(3));
  const auto whole = fs::file_size(cut);
  fs::resize_file(cut, whole / 2);
  // HDF5 refuses a file shorter than its superblock says before any dataset is read: the
  // problem is the file's, with the size it has and the size it should have.
  const auto cut_problems = verify_checkpoint_file(cut);
  REQUIRE(cut_problems.size() == 1);
  CHECK(cut_problems[0].find(cut) != std::string::npos);
  CHECK(cut_problems[0].find("truncated file") != std::string::npos);
  CHECK(cut_problems[0].find("eof = " + std::to_string(whole / 2)) != std::string::npos);
  CHECK(cut_problems[0].find("stored_eof = " + std::to_string(whole)) != std::string::npos);
  testing::check_refused<CheckpointError>([&] { read_checkpoint_file(cut); }, cut);
}

TEST_CASE("checkpoint store: commit, latest marker, keep policy, and no temp files left") {
  TempDir dir;
  const std::string ck = dir.path + "/ck";
  for (std::uint64_t step : {10, 20, 30, 40, 50}) save_checkpoint(ck, sample_state(step), {2, 20});
  std::ofstream(ck + "/" + temporary_name_for("step-00000060.h5"))
      << "partial";  // an earlier write of ours that failed
  save_checkpoint(ck, sample_state(60), {2, 20});
  std::vector<std::uint64_t> steps;
  for (const auto& e : list_checkpoints(ck)) steps.push_back(e.step);
  CHECK(steps == std::vector<std::uint64_t>{20, 40, 50, 60});
  std::ifstream latest(ck + "/latest");
  std::string line;
  std::getline(latest, line);
  CHECK(line == "step-00000060.h5");
  for (const auto& entry : fs::directory_iterator(ck))
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
  CHECK(find_newest_valid_checkpoint(ck, [](const std::string&) {}) == ck + "/step-00000060.h5");
}

TEST_CASE("checkpoint store: the folder held for a run keeps its checkpoints when the link to it is repointed") {
  TempDir dir;
  fs::create_directories(dir.path + "/first");
  fs::create_directories(dir.path + "/second");
  fs::create_directory_symlink("first", dir.path + "/ck");
  const TrustedFolder folder = open_checkpoint_folder(dir.path + "/ck", false);
  save_checkpoint(folder, sample_state(10), {});
  fs::remove(dir.path + "/ck");
  fs::create_directory_symlink("second", dir.path + "/ck");
  const std::string path = save_checkpoint(folder, sample_state(20), {1, 0});
  CHECK(path == dir.path + "/ck/step-00000020.h5");  // the name the run was given, for people
  std::vector<std::string> first;
  for (const auto& entry : fs::directory_iterator(dir.path + "/first")) first.push_back(entry.path().filename());
  std::sort(first.begin(), first.end());
  CHECK(first == std::vector<std::string>{"latest", "step-00000020.h5"});  // the keep policy ran there too
  CHECK(fs::is_empty(dir.path + "/second"));
  CHECK(read_checkpoint_file(dir.path + "/first/step-00000020.h5").counters.step == 20);
}

TEST_CASE("checkpoint store: a corrupt or truncated newest file falls back to the previous one, with a warning") {
  TempDir dir;
  for (std::uint64_t step : {1, 2, 3}) save_checkpoint(dir.path, sample_state(step), {});
  const std::string newest = dir.path + "/step-00000003.h5", middle = dir.path + "/step-00000002.h5";
  flip_byte(newest, data_offset(newest, "/model/layer1.weight"));
  fs::resize_file(middle, fs::file_size(middle) - 100);
  std::vector<std::string> warnings;
  auto state = load_newest_valid_checkpoint(dir.path, [&](const std::string& w) { warnings.push_back(w); });
  REQUIRE(state);
  CHECK(state->counters.step == 1);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("step-00000003.h5 is unusable") != std::string::npos);
  CHECK(warnings[0].find("/model/layer1.weight: checksum mismatch") != std::string::npos);
  CHECK(warnings[1].find("step-00000002.h5 is unusable") != std::string::npos);
  TempDir empty;
  CHECK_FALSE(load_newest_valid_checkpoint(empty.path, [](const std::string&) {}));
  CHECK_FALSE(load_newest_valid_checkpoint(empty.path + "/missing", [](const std::string&) {}));
}

TEST_CASE(
    "checkpoint store: a folder's newest valid checkpoint is found past a corrupt and a truncated one, each named") {
  TempDir dir;
  for (std::uint64_t step : {1, 2, 3}) save_checkpoint(dir.path, sample_state(step), {});
  const std::string newest = dir.path + "/step-00000003.h5", middle = dir.path + "/step-00000002.h5";
  // A byte of the optimizer's state: a file whose model part alone is right is no valid checkpoint.
  flip_byte(newest, data_offset(newest, "/optimizer/exp_avg_sq/layer1.weight"));
  fs::resize_file(middle, fs::file_size(middle) - 100);
  std::vector<std::string> warnings;
  CHECK(find_newest_valid_checkpoint(dir.path, [&](const std::string& w) { warnings.push_back(w); }) ==
        dir.path + "/step-00000001.h5");
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("step-00000003.h5 is unusable") != std::string::npos);
  CHECK(warnings[0].find("/optimizer/exp_avg_sq/layer1.weight: checksum mismatch") != std::string::npos);
  CHECK(warnings[0].find("falling back to step-00000002.h5") != std::string::npos);
  CHECK(warnings[1].find("step-00000002.h5 is unusable") != std::string::npos);
  fs::remove(dir.path + "/step-00000001.h5");
  CHECK(find_newest_valid_checkpoint(dir.path, [](const std::string&) {}).empty());
  CHECK_THROWS_WITH_AS(checkpoint_to_read(dir.path, [](const std::string&) {}),
                       doctest::Contains("no valid checkpoint"), std::runtime_error);
}

TEST_CASE("checkpoint store: an unwritable folder is a CheckpointWriteError naming the path") {
  if (geteuid() == 0) {
    // root writes anywhere: a path under a regular file cannot be a folder for anyone.
    TempDir dir;
    std::ofstream(dir.path + "/file") << "x";
    testing::check_refused<CheckpointWriteError>([&] { save_checkpoint(dir.path + "/file/ck", sample_state(1), {}); },
                                                 dir.path + "/file/ck");
  } else {
    TempDir dir;
    chmod(dir.path.c_str(), 0500);
    testing::check_refused<CheckpointWriteError>([&] { save_checkpoint(dir.path, sample_state(1), {}); }, dir.path);
    chmod(dir.path.c_str(), 0700);
  }
}

TEST_CASE("checkpoint writer: a background write's error reaches the training thread, named, exactly once") {
  int writes = 0;
  CheckpointWriter writer(true, [&](const CheckpointState& s) {
    ++writes;
    if (s.counters.step == 2)
      throw CheckpointWriteError("cannot write the checkpoint '/x/step-00000002.h5': disk full");
  });
  auto step = [](std::uint64_t n) { return [n](CheckpointState& s) { s.counters.step = n; }; };
  writer.submit(step(1));
  writer.wait_copied();
  writer.submit(step(2));  // waits for step 1's write first
  testing::check_refused<CheckpointWriteError>([&] { writer.wait(); }, "/x/step-00000002.h5");
  CHECK_NOTHROW(writer.wait());  // reported once, not again
  writer.submit(step(3));
  writer.wait();
  CHECK(writes == 3);
  CHECK_FALSE(writer.busy());
}

TEST_CASE("checkpoint writer: the copy happens before wait_copied returns; a failed copy is reported there") {
  HostVector<float> live(1000, 1.0f);
  HostVector<float> written;
  std::promise<void> changed;
  // The write itself waits until the parameters have changed: what it writes must be the copy.
  CheckpointWriter writer(true, [&, done = changed.get_future().share()](const CheckpointState& s) {
    done.wait();
    written = s.params;
  });
  writer.submit([&](CheckpointState& s) {
    // A slow copy: a wait_copied that returned before it would let the change below in first.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s.params = live;
  });
  writer.wait_copied();
  live.assign(1000, 2.0f);  // the optimizer may now change the parameters
  changed.set_value();
  writer.wait();
  CHECK(written == HostVector<float>(1000, 1.0f));
  CheckpointWriter failing(true, [](const CheckpointState&) {});
  failing.submit([](CheckpointState&) { throw std::runtime_error("copy failed"); });
  testing::check_refused<std::runtime_error>([&] { failing.wait_copied(); }, "copy failed");
}

TEST_CASE("checkpoint writer: while a background write is in flight, another thread's HDF5 file is refused") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  std::promise<void> release, writing;
  CheckpointWriter writer(true, [&, done = release.get_future().share()](const CheckpointState& s) {
    write_checkpoint_file(path, s);  // the writer's own thread may use HDF5
    writing.set_value();
    done.wait();
  });
  // Released however this test ends, before the writer waits for its thread.
  std::once_flag released;
  auto let_go = [&] { std::call_once(released, [&] { release.set_value(); }); };
  const std::unique_ptr<void, std::function<void(void*)>> guard(&released, [&](void*) { let_go(); });
  writer.submit([](CheckpointState& s) { s = sample_state(1); });
  writing.get_future().wait();
  // The training thread: HDF5's MPI build is not thread-safe, so its open is refused, named.
  testing::check_refused<std::logic_error>([&] { h5::open_file(path, H5F_ACC_RDONLY); }, path);
  let_go();
  writer.wait();
  CHECK_NOTHROW(h5::open_file(path, H5F_ACC_RDONLY));  // the write done, the thread may again
}

TEST_CASE("checkpoint writer: another thread can wait, bounded, for the background write in flight") {
  using std::chrono::milliseconds;
  std::promise<void> release;
  CheckpointWriter writer(true, [done = release.get_future().share()](const CheckpointState&) { done.wait(); });
  std::once_flag released;
  auto let_go = [&] { std::call_once(released, [&] { release.set_value(); }); };
  const std::unique_ptr<void, std::function<void(void*)>> guard(&released, [&](void*) { let_go(); });
  CHECK(wait_for_writes_in_flight(milliseconds(0)));  // none yet
  writer.submit([](CheckpointState& s) { s = sample_state(1); });
  CHECK_FALSE(wait_for_writes_in_flight(milliseconds(50)));  // held: the wait gives up at its limit
  // The watchdog's thread, as it ends a failed step: it sees the write finish.
  auto waiter = std::async(std::launch::async, [] { return wait_for_writes_in_flight(milliseconds(10000)); });
  let_go();
  CHECK(waiter.get());
  writer.wait();
  CHECK(wait_for_writes_in_flight(milliseconds(0)));
}

TEST_CASE("checkpoint writer: synchronous mode copies and writes inside submit") {
  HostVector<float> live(100, 1.0f);
  HostVector<float> written;
  std::thread::id copier, writer_thread;
  CheckpointWriter writer(false, [&](const CheckpointState& s) {
    writer_thread = std::this_thread::get_id();
    written = s.params;
  });
  writer.submit([&](CheckpointState& s) {
    copier = std::this_thread::get_id();
    s.params = live;
  });
  // Both done by the time submit returns, on the calling thread, with nothing left in flight.
  CHECK(copier == std::this_thread::get_id());
  CHECK(writer_thread == std::this_thread::get_id());
  CHECK(written == HostVector<float>(100, 1.0f));
  CHECK_FALSE(writer.busy());
  live.assign(100, 2.0f);
  writer.wait();
  CHECK(written == HostVector<float>(100, 1.0f));
}

TEST_CASE("checkpoint resume: a checkpoint that does not fit the run is refused with the reason") {
  const CheckpointState s = sample_state(5);
  HostVector<float> p, f, g;
  ResumeTarget t{s.model, "adamw", 32, 42, 100, &p, &f, &g};
  CHECK(checkpoint_mismatch(s, t).empty());
  ResumeTarget other = t;
  other.model = mlp_model_layout(mlp_layout(MlpShape{6, {5}, 3}));
  CHECK(checkpoint_mismatch(s, other) == "its layers (out x in) are [4x6, 3x4] but this run's model has [5x6, 3x5]");
  other = t;
  other.optimizer = "sgd";
  CHECK(checkpoint_mismatch(s, other).find("adamw state but train.optimizer is sgd") != std::string::npos);
  other = t;
  other.global_batch = 64;
  CHECK(checkpoint_mismatch(s, other).find("train.global_batch = 32") != std::string::npos);
  other = t;
  other.seed = 1;
  CHECK(checkpoint_mismatch(s, other).find("train.seed = 42") != std::string::npos);
}

TEST_CASE("checkpoint resume: a step beyond the run's schedule, or counters that disagree with the step, are refused") {
  HostVector<float> p, f, g;
  const CheckpointState s = sample_state(25);  // 10 batches per epoch, global batch 32
  ResumeTarget t{s.model, "adamw", 32, 42, 100, &p, &f, &g, 10};
  CHECK(checkpoint_mismatch(s, t).empty());
  CheckpointState bad = s;
  bad.counters.step = ~std::uint64_t{0};
  CHECK(checkpoint_mismatch(bad, t) ==
        "its /train/step is 18446744073709551615 but this run has 100 steps (expected 0 to 100)");
  t.total_steps = 25;  // a finished run's last checkpoint
  CHECK(checkpoint_mismatch(s, t).empty());
  t.total_steps = 24;
  CHECK(checkpoint_mismatch(s, t) == "its /train/step is 25 but this run has 24 steps (expected 0 to 24)");
  t.total_steps = 100;
  bad = s;
  bad.counters.epoch = 7;
  CHECK(checkpoint_mismatch(bad, t) == "its /train/epoch is 7 but step 25 at 10 batches per epoch is in epoch 2");
  bad = s;
  bad.counters.batch_in_epoch = 9;
  CHECK(checkpoint_mismatch(bad, t) == "its /train/batch_in_epoch is 9 but step 25 at 10 batches per epoch is batch 5");
  bad = s;
  bad.counters.samples_seen = 1;
  CHECK(checkpoint_mismatch(bad, t) ==
        "its /train/samples_seen is 1 but step 25 of global batches of 32 is 800 samples");
  bad = s;
  bad.counters.optimizer_steps = 3;
  CHECK(checkpoint_mismatch(bad, t) == "its /optimizer/step_count is 3 but its /train/step is 25 (expected equal)");
}

TEST_CASE("checkpoint file: a checkpoint of other layers is refused before any buffer is sized from it") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  write_checkpoint_file(path, sample_state(3));
  const ModelLayout run = mlp_model_layout(mlp_layout(MlpShape{6, {5}, 3}));
  CheckpointState into;
  into.params.assign(run.parameters(), 0.0f);
  testing::check_refused<CheckpointMismatch>(
      [&] { read_checkpoint_file(path, into, &run); },
      "cannot resume from " + path + ": its layers (out x in) are [4x6, 3x4] but this run's model has [5x6, 3x5]");
  CHECK(into.params.size() == run.parameters());
  CHECK(into.first.empty());
}

TEST_CASE("checkpoint file: the model's preprocessing and architecture are stored and read back") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  CheckpointState s = sample_state(3);
  s.recipe = model_recipe_of(Normalization{0.286f, 2.8326666f}, true, "gelu");
  write_checkpoint_file(path, s);
  const CheckpointState r = read_checkpoint_file(path);
  CHECK(r.recipe.activation == "gelu");
  CHECK(r.recipe.input_scale == static_cast<double>(1.0f / 255.0f));
  CHECK(r.recipe.mean == static_cast<double>(0.286f));
  CHECK(r.recipe.inv_stddev == static_cast<double>(2.8326666f));
  h5::Handle file = h5::open_file(path, H5F_ACC_RDONLY);
  h5::Handle model(H5Gopen2(file, "/model", H5P_DEFAULT));
  h5::Handle widths(H5Aopen(model, "widths", H5P_DEFAULT));
  REQUIRE(widths.get() >= 0);
  CHECK(h5::attribute_extent(widths, path).describe() == "int64 [3]");
  std::int64_t values[3] = {};
  REQUIRE(H5Aread(widths, H5T_NATIVE_INT64, values) >= 0);
  CHECK(values[0] == 6);
  CHECK(values[1] == 4);
  CHECK(values[2] == 3);
  CHECK(describe_checkpoint_file(path).find("x = (raw * 0.00392156886 - 0.286000013) * 2.83266664  activation gelu") !=
        std::string::npos);
}

TEST_CASE("checkpoint file: a file from before the preprocessing was stored still reads, with the defaults") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  CheckpointState s = sample_state(3);
  s.recipe = model_recipe_of(Normalization{0.5f, 2.0f}, true, "gelu");
  write_checkpoint_file(path, s);
  {
    h5::Handle file = h5::open_file(path, H5F_ACC_RDWR);
    REQUIRE(H5Ldelete(file, "/preprocessing", H5P_DEFAULT) >= 0);
    h5::Handle model(H5Gopen2(file, "/model", H5P_DEFAULT));
    REQUIRE(H5Adelete(model, "widths") >= 0);
    REQUIRE(H5Adelete(model, "activation") >= 0);
  }
  CHECK(verify_checkpoint_file(path).empty());
  const CheckpointState r = read_checkpoint_file(path);
  CHECK(r.params == s.params);
  CHECK(r.recipe.activation == ModelRecipe{}.activation);
  CHECK(r.recipe.mean == 0.0);
}

TEST_CASE("h5 byte_count: a shape's bytes, or nullopt when they overflow") {
  CHECK(h5::byte_count({}, 8) == 8u);
  CHECK(h5::byte_count({32768, 16384}, 4) == std::size_t{1} << 31);
  CHECK(h5::byte_count({0, ~hsize_t{0}}, 8) == 0u);
  CHECK_FALSE(h5::byte_count({(hsize_t{1} << 61) + 1}, 8));
  CHECK_FALSE(h5::byte_count({hsize_t{1} << 40, hsize_t{1} << 40}, 1));
}

TEST_CASE("checkpoint file: tensors of several read pieces verify, and a flip in a later piece is caught") {
  TempDir dir;
  const CheckpointState s = state_of_shape(MlpShape{784, {3000}, 10});  // layer1.weight: 9.4 MB, many 1 MiB pieces
  const std::string path = dir.path + "/big.h5";
  write_checkpoint_file(path, s);
  CHECK(read_checkpoint_file(path).params == s.params);
  flip_byte(path, data_offset(path, "/model/layer1.weight") + (std::uintmax_t{17} << 19));  // at 8.5 MiB: a later piece
  testing::check_refused<CheckpointError>([&] { read_checkpoint_file(path); },
                                          "/model/layer1.weight: checksum mismatch");
}

TEST_CASE(
    "checkpoint file: tensors of a megabyte or more start at a multiple of 4 KiB in the file; smaller ones pack") {
  TempDir dir;
  const CheckpointState s = state_of_shape(MlpShape{784, {640}, 10});  // layer1.weight 2.0 MB, layer2.weight 25.6 KB
  const std::size_t n = s.model.parameters();
  const std::string path = dir.path + "/aligned.h5";
  write_checkpoint_file(path, s);
  for (const std::string group : {"/model", "/optimizer/exp_avg", "/optimizer/exp_avg_sq"}) {
    CAPTURE(group);
    CHECK(data_offset(path, group + "/layer1.weight") % 4096 == 0);
  }
  // The small ones are not padded to a block each: at most a block of padding a big tensor.
  CHECK(fs::file_size(path) < 3 * n * sizeof(float) + 3 * 4096 + (std::size_t{64} << 10));
  // Read into new buffers (aligned: host_vector.h), the big tensors straight from the file.
  const CheckpointState back = read_checkpoint_file(path);
  CHECK(back.params == s.params);
  CHECK(back.second == s.second);
  CHECK(reinterpret_cast<std::uintptr_t>(back.params.data()) % 4096 == 0);
}

namespace {

// One rank: the collectives are no-ops, so resume_from_checkpoint runs on rank 0's code path.

}  // namespace

TEST_CASE("checkpoint resume: reads into the run's own buffers; with no usable checkpoint they hold a fresh start") {
  TempDir dir;
  const CheckpointState saved = sample_state(7);
  // A fresh run's state, as the trainer has it before resuming.
  HostVector<float> params(saved.params.size()), first(saved.params.size(), 0.0f), second(saved.params.size(), 0.0f);
  initialize_model_parameters(saved.model, 42, params);
  const HostVector<float> fresh = params;
  ResumeTarget t{saved.model, "adamw", 32, 42, 100, &params, &first, &second};
  const auto comm_owner = make_single_process_comm();
  Comm& comm = *comm_owner;
  auto quiet = [](const std::string&) {};
  CHECK_FALSE(resume_from_checkpoint(dir.path, t, comm, quiet));  // empty folder
  CHECK(params == fresh);

  save_checkpoint(dir.path, saved, {});
  const float* storage = params.data();
  auto resumed = resume_from_checkpoint(dir.path, t, comm, quiet);
  REQUIRE(resumed);
  CHECK(resumed->counters.step == 7);
  CHECK(params == saved.params);
  CHECK(first == saved.first);
  CHECK(second == saved.second);
  CHECK(params.data() == storage);  // the same buffer, read into

  // Every checkpoint bad (one damaged in its last tensor, after the parameters were read): a fresh start.
  const std::string path = dir.path + "/step-00000007.h5";
  flip_byte(path, data_offset(path, "/optimizer/exp_avg_sq/layer2.bias"));
  std::vector<std::string> warnings;
  CHECK_FALSE(resume_from_checkpoint(dir.path, t, comm, [&](const std::string& w) { warnings.push_back(w); }));
  CHECK(warnings.size() == 1);
  CHECK(params == fresh);
  CHECK(first == HostVector<float>(fresh.size(), 0.0f));
  CHECK(second == HostVector<float>(fresh.size(), 0.0f));
}
