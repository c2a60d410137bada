// Checkpoints the ranks write together (sharded optimizer state): each rank's places in the file,
// checksums of parts combined into the whole's, a file of three ranks' parts read back as the
// whole state, a bad part named with its rank, and the commit.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "test/unit/test_support.h"
#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_parallel.h"
#include "train/checkpoint/checkpoint_store.h"
#include "train/comm/comm.h"
#include "train/io/crc32.h"
#include "train/io/h5.h"

using namespace slurm_train;
using testing::flip_byte;
using testing::TempDir;
namespace fs = std::filesystem;

namespace {

// A whole state of an MLP 6 -> 4 -> 3 (43 parameters), every value distinct.
CheckpointState whole_state() {
  CheckpointState s;
  s.model = mlp_model_layout(mlp_layout(MlpShape{6, {4}, 3}));
  const std::size_t n = s.model.parameters();
  s.params.resize(n);
  s.first.resize(n);
  s.second.resize(n);
  std::iota(s.params.begin(), s.params.end(), 1.0f);
  std::iota(s.first.begin(), s.first.end(), 1000.0f);
  std::iota(s.second.begin(), s.second.end(), 2000.0f);
  s.optimizer = "adamw";
  s.counters.step = 20;
  s.counters.seed = 42;
  s.counters.global_batch = 32;
  s.counters.world_size = 3;
  s.program_version = "test";
  s.created = "2026-01-01T00:00:00Z";
  s.host = "node1";
  return s;
}

// What the ranks of a parallel write share: `whole` without its tensors.
CheckpointState meta_of(const CheckpointState& whole) {
  CheckpointState s = whole;
  s.is_shard = true;
  s.params.clear();
  s.first.clear();
  s.second.clear();
  return s;
}

// Rank r's part of `whole`: elements [begin, end) of each array, where `whole` keeps them.
ShardData shard_of(const CheckpointState& whole, std::size_t begin, std::size_t end) {
  auto cut = [&](const HostVector<float>& v) { return std::span<const float>(v).subspan(begin, end - begin); };
  return {begin, {cut(whole.params), cut(whole.first), cut(whole.second)}};
}

// Three "ranks" in one process, in save_checkpoint_parallel's order: the structure, each rank's
// parts written, the parts' checksums recorded. Cuts fall inside tensors, and inside rows of
// layer1.weight [4, 6].
void write_by_three_ranks(const std::string& path, const CheckpointState& whole) {
  const std::vector<std::size_t> cuts = {0, 10, 30, 43};
  const std::vector<TensorPiece> pieces = create_checkpoint_file(path, meta_of(whole));
  std::vector<ShardChecksum> sums;
  for (int r = 0; r < 3; ++r) {
    const ShardData mine = shard_of(whole, cuts[r], cuts[r + 1]);
    const std::vector<DatasetPart> parts = shard_parts(whole.model, mine.begin, mine.arrays);
    const std::vector<ShardChecksum> written = write_shard_parts(path, pieces, parts, r);
    REQUIRE(written.size() == parts.size());
    for (std::size_t i = 0; i < parts.size(); ++i)
      CHECK(written[i].crc == crc32_update(0, parts[i].data, parts[i].count * sizeof(float)));
    sums.insert(sums.end(), written.begin(), written.end());
  }
  store_shard_checksums(path, pieces, sums);
}

}  // namespace

TEST_CASE("shard parts: a shard's elements of each array, cut at its tensors, in the file's dataset order") {
  const ModelLayout model = mlp_model_layout(mlp_layout(MlpShape{6, {4}, 3}));  // 24 | 4 | 12 | 3
  const std::vector<float> params(20, 0.f), first(20, 0.f);
  const auto parts = shard_parts(model, 10, {params, first});  // elements 10..29
  REQUIRE(parts.size() == 6);
  // layer1.weight from its element 10 (14 of them), layer1.bias whole, layer2.weight's first 2.
  CHECK(parts[0].dataset == 0);
  CHECK(parts[0].first == 10);
  CHECK(parts[0].count == 14);
  CHECK(parts[0].data == params.data());
  CHECK(parts[1].dataset == 1);
  CHECK(parts[1].count == 4);
  CHECK(parts[1].data == params.data() + 14);
  CHECK(parts[2].dataset == 2);
  CHECK(parts[2].first == 0);
  CHECK(parts[2].count == 2);
  CHECK(parts[3].dataset == 4);  // the first moment's layer1.weight
  CHECK(parts[3].first == 10);
  CHECK(parts[3].data == first.data());
  // A rank with an empty shard (more ranks than blocks of parameters) writes nothing.
  const std::vector<float> none;
  CHECK(shard_parts(model, 43, {none, none}).empty());
  const std::vector<float> too_long(40, 0.f);
  testing::check_refused<std::invalid_argument>([&] { shard_parts(model, 10, {too_long}); },
                                                "elements 10 to 50 of a model of 43");
}

TEST_CASE("shard parts: a missing file, or a part past its tensor's end, is named") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  const CheckpointState whole = whole_state();
  const std::vector<TensorPiece> pieces = create_checkpoint_file(path, meta_of(whole));
  const float data[30] = {};
  testing::check_refused<CheckpointWriteError>(
      [&] {
        write_shard_parts(dir.path + "/none.h5", pieces, {{0, 0, 1, data}}, 1);
      },
      "cannot open '" + dir.path +
          "/none.h5' for writing: No such file or directory (is the folder on storage that "
          "every node shares?)");
  // layer1.bias (tensor 1) holds 4 elements: elements 2 to 6 pass its end.
  testing::check_refused<CheckpointWriteError>(
      [&] {
        write_shard_parts(path, pieces, {{1, 2, 4, data}}, 1);
      },
      "elements 2 to 6 of /model/layer1.bias, which holds 4");
}

TEST_CASE("crc32 combine: the checksums of two parts give the whole's") {
  std::vector<unsigned char> data(100000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7 + i / 300);
  const std::uint32_t whole = crc32_update(0, data.data(), data.size());
  for (std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{99999}})
    CHECK(crc32_combine_bytes(crc32_update(0, data.data(), cut), crc32_update(0, data.data() + cut, data.size() - cut),
                              data.size() - cut) == whole);
}

TEST_CASE("parallel checkpoint file: three ranks' parts read back as the whole state; a bad part names its rank") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  const CheckpointState whole = whole_state();
  write_by_three_ranks(path, whole);
  CHECK(verify_checkpoint_file(path).empty());
  const CheckpointState back = read_checkpoint_file(path);
  CHECK(back.params == whole.params);
  CHECK(back.first == whole.first);
  CHECK(back.second == whole.second);
  CHECK(back.counters.step == 20);

  // The same bytes as rank 0's serial write of the whole state, with the same crc32s.
  const std::string serial = dir.path + "/serial.h5";
  write_checkpoint_file(serial, whole);
  {
    h5::Handle a = h5::open_file(path, H5F_ACC_RDONLY), b = h5::open_file(serial, H5F_ACC_RDONLY);
    for (const char* name : {"/model/layer1.weight", "/optimizer/exp_avg_sq/layer2.bias"}) {
      h5::Handle x = h5::open_dataset(a, name, path), y = h5::open_dataset(b, name, serial);
      std::uint32_t cx = 0, cy = 0;
      h5::Handle ax(H5Aopen(x, "crc32", H5P_DEFAULT)), ay(H5Aopen(y, "crc32", H5P_DEFAULT));
      REQUIRE(H5Aread(ax, H5T_NATIVE_UINT32, &cx) >= 0);
      REQUIRE(H5Aread(ay, H5T_NATIVE_UINT32, &cy) >= 0);
      CHECK(cx == cy);
    }
  }

  // Element 35 of the second moment is rank 2's (layer2.weight's element 7).
  haddr_t at = 0;
  {
    h5::Handle file = h5::open_file(path, H5F_ACC_RDONLY);
    at = H5Dget_offset(h5::open_dataset(file, "/optimizer/exp_avg_sq/layer2.weight", path));
  }
  flip_byte(path, at + 7 * sizeof(float) + 1);
  const auto problems = verify_checkpoint_file(path);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("/optimizer/exp_avg_sq/layer2.weight: part 2 of 2 (elements 2 to 11, written by rank 2) "
                         "fails its checksum") != std::string::npos);
}

TEST_CASE("parallel checkpoint file: parts that leave a gap are refused, naming the tensor") {
  TempDir dir;
  const std::string path = dir.path + "/c.h5";
  const CheckpointState whole = whole_state();
  const std::vector<TensorPiece> pieces = create_checkpoint_file(path, meta_of(whole));
  std::vector<ShardChecksum> parts;
  for (std::size_t i = 0; i < pieces.size(); ++i) parts.push_back({i, 0, pieces[i].bytes / sizeof(float), 0, 0});
  parts[2].first = 1;  // layer2.weight from its element 1: element 0 written by nobody
  testing::check_refused<CheckpointWriteError>([&] { store_shard_checksums(path, pieces, parts); },
                                               "/model/layer2.weight cover 0 of its 12 elements");
}

TEST_CASE("parallel checkpoint: a world of one commits it with the serial write's protocol") {
  TempDir dir;
  const auto comm = make_single_process_comm();
  const CheckpointState whole = whole_state();
  std::optional<TrustedFolder> folder;
  const std::string path =
      save_checkpoint_parallel(*comm, folder, dir.path + "/ck", meta_of(whole), shard_of(whole, 0, 43), {2, 0});
  REQUIRE(folder);  // held for the next save
  CHECK(path == dir.path + "/ck/step-00000020.h5");
  CHECK(verify_checkpoint_file(path).empty());
  CHECK(read_checkpoint_file(path).second == whole.second);
  std::ifstream latest(dir.path + "/ck/latest");
  std::string line;
  std::getline(latest, line);
  CHECK(line == "step-00000020.h5");
  for (const auto& e : fs::directory_iterator(dir.path + "/ck"))
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
  // An unwritable folder: the error names it, and nothing is left behind.
  fs::create_directories(dir.path + "/file");
  std::ofstream(dir.path + "/file/ck") << "not a folder";
  testing::check_refused<CheckpointWriteError>(
      [&] {
        std::optional<TrustedFolder> none;
        save_checkpoint_parallel(*comm, none, dir.path + "/file/ck", meta_of(whole), shard_of(whole, 0, 43), {});
      },
      dir.path + "/file/ck");
}
