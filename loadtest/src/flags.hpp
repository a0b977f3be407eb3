// The command line of gpujoin-loadtest: every flag's value (Flags) and the
// CLI11 options that fill them with their help texts (AddFlags).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace gpujoin::loadtest {

/// The command line as given (AddFlags lists each option's meaning).
struct Flags {
  std::string server = "127.0.0.1:50051";
  std::string token, tls_ca, tls_name, tls_client_cert, tls_client_key;
  std::string rpc_name = "lookup";
  std::string index = "loadtest";
  std::string build_keys_text;
  double load_factor = 0.5;
  bool keep_index = false;
  std::string batch_rows_text = "64K";
  std::string concurrency_text = "1";
  std::string concurrency_range;
  int channels = 1;
  int in_flight = 2;
  double duration = 5.0, warmup = 1.0;
  uint64_t requests = 0;
  double hit_ratio = 0.9;
  std::string keyspace_text;
  uint32_t seed = 1;
  uint32_t groups = 1024;
  std::string agg_op = "sum";
  std::string key_type = "u32";
  uint32_t multiplicity = 1;
  std::string join_kind = "inner";
  int mutate_streams = 0;
  std::string mutate_rows_text;
  int verify_every = 4;
  bool echo = false, echo_only = false, json = false;
  bool payload = false;
  bool replicated = false;
  std::string redis;
  std::string json_file;
  int max_message_bytes = 256 << 20;
  CLI::Option* multiplicity_option = nullptr;  // given: a keep_all index
};

/// Registers every flag of the tool on `app`, filling `f`.
void AddFlags(CLI::App& app, Flags& f);

}  // namespace gpujoin::loadtest
