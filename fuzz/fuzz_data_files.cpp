// Fuzz target: the --data-dir file calls as the service runs them
// (Operations::SaveIndex, LoadIndex, ListFiles, DeleteFile, DropIndex and builds
// through BuildSession; server/src/storage/snapshot_store.cpp) on the CPU backend, with a
// SnapshotStore on a scratch directory made afresh for every input. Index names
// are "a", "b" and "c"; file names are fuzzed bytes. A build makes a uint32
// index or a string-keyed one (a key schema), so that the files saved and
// loaded are of both snapshot formats' kinds.
//
// Input: a sequence of frames (fuzz_support.hpp SplitFrames); each frame's
// first byte is the call (low 3 bits: 0 builds a uint32 index, 1 a string-keyed
// one) and the index (next 2 bits; 3 = an index name taken from the file
// bytes), the rest is the file name. A model holds the
// files the directory must have (snapshot of which index, or copy) and the live
// versions. Checked after every call, once the store's writes are done:
//  - the status is what the documented rules give: a file name outside
//    [A-Za-z0-9_.-]{1,128}, "." or "..", starting with "." or containing
//    ".gjsnap.tmp-" is INVALID_ARGUMENT (DeleteFile: any plain name but a
//    temporary file's); SaveIndex into "<other>.gjsnap" is
//    INVALID_ARGUMENT naming both; an unknown index NOT_FOUND; a missing file
//    NOT_FOUND; LoadIndex over a live name without replace ALREADY_EXISTS;
//    DeleteFile of a live index's snapshot FAILED_PRECONDITION;
//  - ListFiles lists exactly the model's files (names, which index's snapshot,
//    live or not), the directory holds no temporary file and nothing else;
//  - every live index's snapshot exists and holds its live version
//    (IndexInfo.durable_version == version): what a restart would serve.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "wire/column_codec.hpp"
#include "fuzz_support.hpp"
#include "prometheus/registry.h"
#include "storage/snapshot_store.hpp"

namespace gpujoin::fuzz {
namespace {

namespace fs = std::filesystem;
constexpr std::string_view kSuffix = ".gjsnap";
// Calls per input: each waits for the store's writes (an fsync or two).
constexpr size_t kMaxCalls = 24;

bool ValidFileName(const std::string& f) {
  return ValidIndexName(f) && f[0] != '.' && f.find(".gjsnap.tmp-") == std::string::npos;
}

// A name DeleteFile takes (whatever ListFiles may list): 1 to 255 bytes, no
// "/" or NUL, not "." or "..", not a temporary file.
bool ListedName(const std::string& f) {
  const bool temporary = f.starts_with(".") && f.find(".gjsnap.tmp-") != std::string::npos &&
                         !f.ends_with(kSuffix);
  return !f.empty() && f.size() <= 255 && f != "." && f != ".." &&
         f.find('/') == std::string::npos && f.find('\0') == std::string::npos && !temporary;
}

// The index a file is the snapshot of, or "".
std::string OwnerOf(const std::string& f) {
  if (!f.ends_with(kSuffix)) return "";
  const std::string stem = f.substr(0, f.size() - kSuffix.size());
  return ValidIndexName(stem) ? stem : "";
}

struct Model {
  std::map<std::string, std::string> files;  // file -> owner index ("" = copy)
  std::map<std::string, uint64_t> live;      // index -> version
  std::map<std::string, uint64_t> versions;  // index -> last version number used
};

class Fixture {
 public:
  Fixture() : harness_(uint64_t{64} << 20, server::ServerConfig()) {
    char pattern[] = "/tmp/gpujoin_fuzz_data_files_XXXXXX";
    FUZZ_CHECK(::mkdtemp(pattern) != nullptr, "mkdtemp");
    dir_ = pattern;
  }
  ~Fixture() {
    harness_.Reset();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  void Run(const uint8_t* data, size_t size) {
    harness_.Reset();
    store_.reset();
    registry_ = std::make_unique<prometheus::Registry>();
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::create_directories(dir_);
    server::SnapshotStoreOptions options;
    options.data_dir = dir_;
    options.max_copy_bytes = 0;
    auto store = server::SnapshotStore::Open(options, &harness_.backend(), &harness_.budget(),
                                             *registry_);
    FUZZ_CHECK(store.ok(), Describe(store.status()));
    store_ = std::move(*store);
    harness_.AttachSnapshots(store_.get());
    model_ = Model();
    for (const std::string_view frame : SplitFrames(AsView(data, size), kMaxCalls)) {
      if (frame.empty()) continue;
      Step(uint8_t(frame[0]), std::string(frame.substr(1)));
      store_->WaitIdle();
      Check();
    }
    harness_.Reset();  // drops delete the snapshots before the store goes
    store_.reset();
  }

 private:
  void Step(uint8_t op, const std::string& file) {
    const int which = (op >> 3) & 3;
    const std::string index = which == 3 ? file : std::string(1, char('a' + which));
    switch (op & 7) {
      case 0:
      case 1:
        return Build(index, /*key_schema=*/(op & 7) == 1);
      case 2:
        return Save(index, file);
      case 3:
      case 4:
        return Load(index, file, (op & 0x20) != 0);
      case 5:
        return Delete(file);
      case 6:
        return Drop(index);
      default:
        return List();
    }
  }

  void Build(const std::string& index, bool key_schema) {
    if (!ValidIndexName(index)) return;  // the build session's own target checks names
    const uint64_t version = ++model_.versions[index];
    server::BuildSession session(&harness_.ops());
    v1::BuildIndexRequest spec;
    spec.mutable_spec()->set_name(index);
    spec.mutable_spec()->set_capacity(8);
    spec.mutable_spec()->set_first_value(uint32_t(version) * 100);
    spec.mutable_spec()->set_replace(true);
    if (key_schema) {
      spec.mutable_spec()->set_key_type(v1::KEY_TYPE_COLUMNS);
      auto* k = spec.mutable_spec()->add_key_columns();
      k->set_name("k");
      k->set_type(v1::COLUMN_TYPE_STRING);
    }
    absl::Status s = session.Add(std::move(spec));
    FUZZ_CHECK(s.ok(), Describe(s));
    v1::BuildIndexRequest chunk;
    if (key_schema) {
      // The empty string is an ordinary key.
      v1::Column* k = chunk.mutable_chunk()->add_key_columns();
      k->set_type(v1::COLUMN_TYPE_STRING);
      k->set_length(3);
      const std::string first = "v" + std::to_string(version);
      k->set_data(first + "x");
      k->set_offsets(server::PackColumn<int32_t>(std::vector<int32_t>{
          0, int32_t(first.size()), int32_t(first.size()), int32_t(first.size() + 1)}));
    } else {
      const std::vector<uint32_t> keys = {uint32_t(version), 7, 9};
      *chunk.mutable_chunk()->mutable_keys()->mutable_packed() = server::PackColumn<uint32_t>(keys);
    }
    s = session.Add(std::move(chunk));
    FUZZ_CHECK(s.ok(), Describe(s));
    std::atomic<bool> cancelled{false};
    auto built = session.Finish(cancelled);
    FUZZ_CHECK(built.ok() && (*built)->version == version,
               built.ok() ? absl::StrCat("version ", (*built)->version) : Describe(built.status()));
    model_.live[index] = version;
    model_.files[index + std::string(kSuffix)] = index;
  }

  void Save(const std::string& index, const std::string& file) {
    v1::SaveIndexRequest r;
    r.set_name(index);
    r.set_file(file);
    v1::SaveIndexResponse out;
    const absl::Status s = harness_.ops().SaveIndex(r, &out);
    const std::string own = index + std::string(kSuffix);
    const std::string target = file.empty() ? own : file;
    absl::StatusCode want = absl::StatusCode::kOk;
    if (!ValidIndexName(index)) {
      want = absl::StatusCode::kInvalidArgument;
    } else if (!file.empty() && file != own &&
               (!ValidFileName(file) || file.ends_with(kSuffix))) {
      want = absl::StatusCode::kInvalidArgument;
    } else if (model_.live.count(index) == 0) {
      want = absl::StatusCode::kNotFound;
    }
    FUZZ_CHECK(s.code() == want, absl::StrCat("SaveIndex ", index, " -> \"", file, "\": ",
                                              Describe(s), ", expected code ", int(want)));
    if (s.ok()) {
      FUZZ_CHECK(out.file() == target && out.version() == model_.live[index], out.DebugString());
      model_.files[target] = OwnerOf(target);
    } else if (want == absl::StatusCode::kInvalidArgument && file.ends_with(kSuffix) &&
               ValidFileName(file) && ValidIndexName(index)) {
      FUZZ_CHECK(MessageHas(s, absl::StrCat("index \"", index, "\"")) &&
                     MessageHas(s, absl::StrCat("\"", file, "\"")),
                 Describe(s));
    }
  }

  void Load(const std::string& index, const std::string& file, bool replace) {
    v1::LoadIndexRequest r;
    r.set_name(index);
    r.set_file(file);
    r.set_replace(replace);
    v1::LoadIndexResponse out;
    const absl::Status s = harness_.ops().LoadIndex(r, &out);
    const std::string source = file.empty() ? index + std::string(kSuffix) : file;
    absl::StatusCode want = absl::StatusCode::kOk;
    if (!ValidIndexName(index) || (!file.empty() && !ValidFileName(file))) {
      want = absl::StatusCode::kInvalidArgument;
    } else if (!replace && model_.live.count(index) != 0) {
      want = absl::StatusCode::kAlreadyExists;
    } else if (model_.files.count(source) == 0) {
      want = absl::StatusCode::kNotFound;
    }
    FUZZ_CHECK(s.code() == want, absl::StrCat("LoadIndex ", index, " <- \"", file, "\": ",
                                              Describe(s), ", expected code ", int(want)));
    if (s.ok()) {
      const uint64_t version = ++model_.versions[index];
      FUZZ_CHECK(out.index().version() == version, out.DebugString());
      model_.live[index] = version;
      model_.files[index + std::string(kSuffix)] = index;
    }
  }

  void Delete(const std::string& file) {
    v1::DeleteFileRequest r;
    r.set_file(file);
    v1::DeleteFileResponse out;
    const absl::Status s = harness_.ops().DeleteFile(r, &out);
    absl::StatusCode want = absl::StatusCode::kOk;
    const std::string owner = OwnerOf(file);
    if (!ListedName(file)) {
      want = absl::StatusCode::kInvalidArgument;
    } else if (!owner.empty() && model_.live.count(owner) != 0) {
      want = absl::StatusCode::kFailedPrecondition;
    } else if (model_.files.count(file) == 0) {
      want = absl::StatusCode::kNotFound;
    }
    FUZZ_CHECK(s.code() == want, absl::StrCat("DeleteFile \"", file, "\": ", Describe(s),
                                              ", expected code ", int(want)));
    if (s.ok()) model_.files.erase(file);
  }

  void Drop(const std::string& index) {
    v1::DropIndexRequest r;
    r.set_name(index);
    v1::DropIndexResponse out;
    const absl::Status s = harness_.ops().DropIndex(r, &out);
    const bool live = ValidIndexName(index) && model_.live.count(index) != 0;
    FUZZ_CHECK(s.ok() == live, absl::StrCat("DropIndex ", index, ": ", Describe(s)));
    if (s.ok()) {
      model_.live.erase(index);
      model_.files.erase(index + std::string(kSuffix));
    }
  }

  void List() {
    v1::ListFilesResponse out;
    const absl::Status s = harness_.ops().ListFiles(&out);
    FUZZ_CHECK(s.ok(), Describe(s));
  }

  void Check() {
    v1::ListFilesResponse out;
    const absl::Status s = harness_.ops().ListFiles(&out);
    FUZZ_CHECK(s.ok(), Describe(s));
    std::map<std::string, std::string> listed;
    for (const v1::DataFile& f : out.files()) {
      listed[f.file()] = f.index();
      FUZZ_CHECK(f.live() == (!f.index().empty() && model_.live.count(f.index()) != 0),
                 f.DebugString());
    }
    FUZZ_CHECK(listed == model_.files, absl::StrCat("ListFiles: ", out.DebugString()));
    size_t entries = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      ++entries;
      FUZZ_CHECK(model_.files.count(e.path().filename().string()) != 0,
                 absl::StrCat("unexpected entry ", e.path().filename().string()));
    }
    FUZZ_CHECK(entries == model_.files.size(), "directory entries");
    for (const auto& [index, version] : model_.live) {
      v1::DescribeIndexRequest r;
      r.set_name(index);
      v1::DescribeIndexResponse info;
      const absl::Status d = harness_.ops().DescribeIndex(r, &info);
      FUZZ_CHECK(d.ok(), Describe(d));
      FUZZ_CHECK(info.index().version() == version && info.index().durable_version() == version,
                 absl::StrCat(index, ": live ", info.index().version(), ", durable ",
                              info.index().durable_version(), ", model ", version));
    }
  }

  Harness harness_;
  std::string dir_;
  std::unique_ptr<prometheus::Registry> registry_;
  std::unique_ptr<server::SnapshotStore> store_;
  Model model_;
};

}  // namespace
}  // namespace gpujoin::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* fixture = new gpujoin::fuzz::Fixture();
  fixture->Run(data, size);
  return 0;
}
