// The --data-dir calls: SaveIndex and LoadIndex (a snapshot file written from,
// or loaded as, a live index), ListFiles and DeleteFile.
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpujoin/common/status_macros.hpp"
#include "ops/operations.hpp"
#include "storage/snapshot_format.hpp"
#include "storage/snapshot_store.hpp"
#include "wire/names.hpp"

namespace gpujoin::server {
namespace {

absl::Status NeedDataDir(std::string_view rpc) {
  return absl::FailedPreconditionError(absl::StrCat(
      std::string(rpc), ": this gpujoind has no --data-dir; start it with --data-dir DIR"));
}

}  // namespace

absl::Status Operations::SaveIndex(const v1::SaveIndexRequest& request,
                                   v1::SaveIndexResponse* response) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.name(), "name"));
  if (state_.snapshots == nullptr) return NeedDataDir("SaveIndex");
  GPUJOIN_ASSIGN_OR_RETURN(std::string file, SaveFileOf(request.file(), request.name()));
  GPUJOIN_ASSIGN_OR_RETURN(auto version, FindIndex(request.name(), "name"));
  GPUJOIN_ASSIGN_OR_RETURN(SavedSnapshot saved, state_.snapshots->Save(*version, file));
  response->set_file(saved.file);
  response->set_bytes(saved.bytes);
  response->set_version(saved.version);
  response->set_seconds(saved.seconds);
  return absl::OkStatus();
}

absl::Status Operations::LoadIndex(const v1::LoadIndexRequest& request,
                                   v1::LoadIndexResponse* response) {
  GPUJOIN_RETURN_IF_ERROR(ValidateIndexName(request.name(), "name"));
  if (state_.snapshots == nullptr) return NeedDataDir("LoadIndex");
  GPUJOIN_ASSIGN_OR_RETURN(std::string file, LoadFileOf(request.file(), request.name()));
  if (!request.replace() && state_.registry->Contains(request.name())) {
    return absl::AlreadyExistsError(absl::StrCat("index \"", request.name(),
                                                 "\" already exists; set replace to load over it"));
  }
  if (request.min_version() > IndexRegistry::kMaxMinVersion) {
    return absl::InvalidArgumentError(absl::StrCat("min_version: ", request.min_version(),
                                                   " is above the largest, ",
                                                   IndexRegistry::kMaxMinVersion));
  }
  GPUJOIN_ASSIGN_OR_RETURN(std::shared_ptr<IndexVersion> version,
                           state_.snapshots->Load(file, request.name(), 0));
  // A new base: log records of the file's lineage must not replay onto it.
  version->base_id = NewBaseId();
  std::shared_ptr<const IndexVersion> installed = version;
  GPUJOIN_ASSIGN_OR_RETURN(
      auto previous, state_.registry->Install(version, request.replace(), request.min_version()));
  {
    const IndexReadLock held(*installed);  // a Mutate may already change it
    state_.metrics->SetIndex(*installed);
  }
  // Like a build, the load is a new version of the name, and its snapshot must
  // follow: a write of an earlier version still pending or running must not
  // land after it. Also from the name's own file: the load starts a new base
  // (base_id), which the file must hold before the index's write-ahead log
  // may take records of it (Mutate waits for that).
  state_.snapshots->Schedule(installed);
  previous.reset();
  UpdateServiceGauges();
  FillIndexInfo(*installed, response->mutable_index());
  return absl::OkStatus();
}

absl::Status Operations::ListFiles(v1::ListFilesResponse* response) {
  if (state_.snapshots == nullptr) return NeedDataDir("ListFiles");
  const DataFiles files = state_.snapshots->ListFiles();
  for (const DataFileInfo& f : files.files) {
    v1::DataFile* out = response->add_files();
    out->set_file(f.file);
    out->set_bytes(f.bytes);
    out->set_modified_unix_millis(f.modified_unix_millis);
    out->set_index(f.index);
    out->set_live(!f.index.empty() && state_.registry->Contains(f.index));
  }
  response->set_snapshot_bytes(files.snapshot_bytes);
  response->set_copy_bytes(files.copy_bytes);
  response->set_max_copy_bytes(state_.config.max_copy_bytes);
  response->set_max_snapshot_bytes(state_.config.max_snapshot_bytes);
  return absl::OkStatus();
}

absl::Status Operations::DeleteFile(const v1::DeleteFileRequest& request,
                                    v1::DeleteFileResponse* response) {
  if (state_.snapshots == nullptr) return NeedDataDir("DeleteFile");
  GPUJOIN_ASSIGN_OR_RETURN(
      uint64_t bytes, state_.snapshots->DeleteFile(request.file(), [this](const std::string& name) {
        return state_.registry->Contains(name);
      }));
  response->set_bytes(bytes);
  return absl::OkStatus();
}

}  // namespace gpujoin::server
