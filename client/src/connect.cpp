// Client::Connect: the channel (plaintext or TLS, the PEM files read here) and
// its message-size and connection options.
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client_impl.hpp"
#include "gpujoin/client/client.hpp"

namespace gpujoin::client {
namespace {

// The content of the PEM file `path`; `what` names it in errors ("TLS CA file").
absl::StatusOr<std::string> ReadPemFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", std::string(what), " '", path, "'"));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " '", path, "' is empty"));
  }
  return ss.str();
}

}  // namespace

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const ConnectOptions& Client::options() const { return impl_->options_; }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ConnectOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("server address is empty");
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_message_bytes must be positive, got ", options.max_message_bytes));
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (options.own_connection) args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (options.tls_client_cert_file.empty() != options.tls_client_key_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate and its private key must be given together");
  }
  if (!options.tls_client_cert_file.empty() && options.tls_ca_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate needs TLS: give the CA file of the server certificate too");
  }
  if (options.tls_ca_file.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    auto roots = ReadPemFile(options.tls_ca_file, "TLS CA file");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *std::move(roots);
    if (!options.tls_client_cert_file.empty()) {
      auto cert = ReadPemFile(options.tls_client_cert_file, "TLS client certificate file");
      if (!cert.ok()) return cert.status();
      auto key = ReadPemFile(options.tls_client_key_file, "TLS client key file");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    creds = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  auto channel = grpc::CreateCustomChannel(options.address, creds, args);
  if (!channel) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create a channel to '", options.address, "'"));
  }
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(options, std::move(channel))));
}

}  // namespace gpujoin::client
