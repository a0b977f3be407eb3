// The unary calls of the GpuJoin service: server info, index descriptions and
// drops, and the snapshot files under the server's --data-dir. Each goes
// through Client::Impl::Unary and converts its response.
#include <cstdint>
#include <string>
#include <vector>

#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"
#include "gpujoin/common/status_macros.hpp"
#include "wire.hpp"

namespace gpujoin::client {

namespace pb = ::gpujoin::v1;
using Stub = pb::GpuJoin::Stub;
using detail::ToIndexInfo;

absl::StatusOr<ServerInfo> Client::GetServerInfo() {
  GPUJOIN_ASSIGN_OR_RETURN(const pb::GetServerInfoResponse r,
                           impl_->Unary(&Stub::GetServerInfo, pb::GetServerInfoRequest()));
  ServerInfo i;
  i.version = r.version();
  i.backend = r.backend();
  i.device_name = r.device_name();
  i.device_memory_total_bytes = r.device_memory_total_bytes();
  i.device_memory_used_bytes = r.device_memory_used_bytes();
  i.device_memory_budget_bytes = r.device_memory_budget_bytes();
  i.max_message_bytes = r.max_message_bytes();
  i.max_inflight_batches_per_stream = r.max_inflight_batches_per_stream();
  i.max_inflight_batches = r.max_inflight_batches();
  i.index_count = r.index_count();
  i.serving = r.serving();
  i.max_result_bytes = r.max_result_bytes();
  i.max_pending_response_bytes = r.max_pending_response_bytes();
  i.pending_response_bytes = r.pending_response_bytes();
  i.max_mutation_rows = r.max_mutation_rows();
  i.wal_sync = r.wal_sync();
  return i;
}

absl::StatusOr<std::vector<IndexInfo>> Client::ListIndexes() {
  GPUJOIN_ASSIGN_OR_RETURN(const pb::ListIndexesResponse r,
                           impl_->Unary(&Stub::ListIndexes, pb::ListIndexesRequest()));
  std::vector<IndexInfo> out;
  out.reserve(r.indexes_size());
  for (const auto& i : r.indexes()) out.push_back(ToIndexInfo(i));
  return out;
}

absl::StatusOr<IndexInfo> Client::DescribeIndex(const std::string& name) {
  pb::DescribeIndexRequest req;
  req.set_name(name);
  GPUJOIN_ASSIGN_OR_RETURN(const pb::DescribeIndexResponse r,
                           impl_->Unary(&Stub::DescribeIndex, req));
  return ToIndexInfo(r.index());
}

absl::StatusOr<DropResult> Client::DropIndex(const std::string& name) {
  pb::DropIndexRequest req;
  req.set_name(name);
  GPUJOIN_ASSIGN_OR_RETURN(const pb::DropIndexResponse r, impl_->Unary(&Stub::DropIndex, req));
  return DropResult{r.dropped_version(), r.freed_bytes()};
}

absl::StatusOr<SaveResult> Client::SaveIndex(const std::string& name, const std::string& file) {
  pb::SaveIndexRequest req;
  req.set_name(name);
  req.set_file(file);
  GPUJOIN_ASSIGN_OR_RETURN(const pb::SaveIndexResponse r, impl_->Unary(&Stub::SaveIndex, req));
  return SaveResult{r.file(), r.bytes(), r.version(), r.seconds()};
}

absl::StatusOr<IndexInfo> Client::LoadIndex(const std::string& name, const std::string& file,
                                            bool replace) {
  pb::LoadIndexRequest req;
  req.set_name(name);
  req.set_file(file);
  req.set_replace(replace);
  GPUJOIN_ASSIGN_OR_RETURN(const pb::LoadIndexResponse r, impl_->Unary(&Stub::LoadIndex, req));
  return ToIndexInfo(r.index());
}

absl::StatusOr<DataFiles> Client::ListFiles() {
  GPUJOIN_ASSIGN_OR_RETURN(const pb::ListFilesResponse r,
                           impl_->Unary(&Stub::ListFiles, pb::ListFilesRequest()));
  DataFiles out;
  for (const pb::DataFile& f : r.files()) {
    out.files.push_back(
        DataFile{f.file(), f.bytes(), f.modified_unix_millis(), f.index(), f.live()});
  }
  out.snapshot_bytes = r.snapshot_bytes();
  out.copy_bytes = r.copy_bytes();
  out.max_copy_bytes = r.max_copy_bytes();
  out.max_snapshot_bytes = r.max_snapshot_bytes();
  return out;
}

absl::StatusOr<uint64_t> Client::DeleteFile(const std::string& file) {
  pb::DeleteFileRequest req;
  req.set_file(file);
  GPUJOIN_ASSIGN_OR_RETURN(const pb::DeleteFileResponse r, impl_->Unary(&Stub::DeleteFile, req));
  return r.bytes();
}

}  // namespace gpujoin::client
