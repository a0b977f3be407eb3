// Mutual TLS (--tls-client-ca) and the strict auth scope (--auth-scope=all)
// through a real gpujoind. The certificates are made at test time
// with the openssl command line: a CA, a server certificate for localhost and
// 127.0.0.1, a client certificate from that CA and one from a rogue CA.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "gpujoin/client/client.hpp"
#include "gpujoin/testing/files.hpp"
#include "gpujoin/testing/health_check.hpp"
#include "gpujoin/testing/loopback.hpp"
#include "gpujoin/testing/server_process.hpp"
#include "gpujoin/testing/subprocess.hpp"
#include "gpujoin/v1/gpujoin.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace gpujoin::server {
namespace {

using gpujoin::testing::HealthStatus;
using gpujoin::testing::RunProcess;
using gpujoin::testing::RunResult;
using gpujoin::testing::ServerOptions;
using gpujoin::testing::ServerProcess;
using gpujoin::testing::Slurp;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kToken = "mtls-t0ken";

// ---------------------------------------------------------------- certificates

// A temporary directory with ca.pem, server.{pem,key}, client.{pem,key} (signed
// by ca) and rogue.{pem,key} (signed by rogue-ca), P-256, valid for 30 days.
class Certificates {
 public:
  Certificates() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpujoin_tls_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    std::ofstream(Path("openssl.cnf")) << R"([req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
[client_ext]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
)";
    if (MakeCa("ca", "gpujoin test CA") && MakeCa("rogue-ca", "rogue test CA") &&
        MakeLeaf("server", "ca", "localhost", "server_ext", 2) &&
        MakeLeaf("client", "ca", "gpujoin test client", "client_ext", 3)) {
      MakeLeaf("rogue", "rogue-ca", "gpujoin test client", "client_ext", 4);
    }
  }
  ~Certificates() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  /// Empty when every certificate was made, else what failed.
  const std::string& error() const { return error_; }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  bool Run(std::vector<std::string> args) {
    args.insert(args.begin(), "/usr/bin/openssl");
    const RunResult r = RunProcess(args, {.timeout = std::chrono::seconds(30)});
    if (r.code != 0) {
      error_ = "openssl " + args[1] + " failed (" + std::to_string(r.code) + "): " + r.err;
      return false;
    }
    return true;
  }
  bool MakeCa(const std::string& name, const std::string& cn) {
    return Run({"req",
                "-x509",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                Path(name + ".key"),
                "-out",
                Path(name + ".pem"),
                "-days",
                "30",
                "-subj",
                "/CN=" + cn,
                "-config",
                Path("openssl.cnf"),
                "-extensions",
                "ca_ext"});
  }
  bool MakeLeaf(const std::string& name, const std::string& ca, const std::string& cn,
                const std::string& ext, int serial) {
    return Run({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", Path(name + ".key"), "-out", Path(name + ".csr"), "-subj", "/CN=" + cn,
                "-config", Path("openssl.cnf")}) &&
           Run({"x509", "-req", "-in", Path(name + ".csr"), "-CA", Path(ca + ".pem"), "-CAkey",
                Path(ca + ".key"), "-set_serial", std::to_string(serial), "-days", "30", "-out",
                Path(name + ".pem"), "-extfile", Path("openssl.cnf"), "-extensions", ext});
  }

  std::string dir_, error_;
};

// ---------------------------------------------------------------- helpers

// A channel trusting ca.pem; with `client` ("client" or "rogue") presenting that
// certificate.
std::shared_ptr<grpc::Channel> TlsChannel(const Certificates& certs, const std::string& address,
                                          const std::string& client = "") {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = Slurp(certs.Path("ca.pem"));
  if (!client.empty()) {
    ssl.pem_cert_chain = Slurp(certs.Path(client + ".pem"));
    ssl.pem_private_key = Slurp(certs.Path(client + ".key"));
  }
  grpc::ChannelArguments args;
  // A channel of its own per test case: no connection shared with another one.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

std::shared_ptr<grpc::Channel> PlainChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void SetDeadline(grpc::ClientContext* ctx, int seconds = 10) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

grpc::Status GetServerInfo(const std::shared_ptr<grpc::Channel>& channel,
                           const std::string& token = "") {
  auto stub = v1::GpuJoin::NewStub(channel);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  v1::GetServerInfoResponse info;
  return stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info);
}

// One length-delimited protobuf field (wire type 2) with a one-byte tag and a
// short payload, as the raw request bytes below need.
std::string Field(int number, const std::string& payload) {
  std::string out;
  out.push_back(static_cast<char>((number << 3) | 2));
  out.push_back(static_cast<char>(payload.size()));
  return out + payload;
}

// grpc.reflection.v1alpha.ServerReflectionRequest: list_services (field 7) and
// file_containing_symbol (field 4).
const std::string kListServices = Field(7, "");
const std::string kFileOfGpuJoin = Field(4, "gpujoin.v1.GpuJoin");

std::string BufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

struct StreamResult {
  grpc::Status status;
  std::vector<std::string> responses;  // raw response messages, in order
};

// A bidi call of `method` through the generic callback API: writes `requests`
// one after the other, half-closes, reads every response.
class BidiCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BidiCall(grpc::GenericStub* stub, const std::string& method, std::vector<std::string> requests,
           const std::string& token)
      : requests_(std::move(requests)) {
    SetDeadline(&ctx_);
    if (!token.empty()) ctx_.AddMetadata("authorization", "Bearer " + token);
    stub->PrepareBidiStreamingCall(&ctx_, method, grpc::StubOptions(), this);
    StartRead(&in_);
    WriteNext();
    StartCall();
  }
  StreamResult Wait() { return done_.get_future().get(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    result_.responses.push_back(BufferBytes(in_));
    StartRead(&in_);
  }
  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnDone(const grpc::Status& status) override {
    result_.status = status;
    done_.set_value(std::move(result_));
  }

 private:
  void WriteNext() {
    if (next_ == requests_.size()) {
      StartWritesDone();
      return;
    }
    grpc::Slice slice(requests_[next_++]);
    out_ = grpc::ByteBuffer(&slice, 1);
    StartWrite(&out_);
  }

  grpc::ClientContext ctx_;
  std::vector<std::string> requests_;
  size_t next_ = 0;
  grpc::ByteBuffer in_, out_;
  StreamResult result_;
  std::promise<StreamResult> done_;
};

StreamResult Reflect(
    const std::shared_ptr<grpc::Channel>& channel, std::vector<std::string> requests,
    const std::string& token = "",
    const std::string& method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo") {
  grpc::GenericStub stub(channel);
  BidiCall call(&stub, method, std::move(requests), token);
  return call.Wait();
}

using gpujoin::testing::HttpResponse;

// GET with an optional Authorization header (gpujoin::testing::HttpRequest).
HttpResponse HttpGet(const std::string& address, const std::string& path,
                     const std::string& authorization = "") {
  return gpujoin::testing::HttpRequest(address, path, authorization);
}

// ---------------------------------------------------------------- fixtures

class TlsFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = new Certificates(); }
  static void TearDownTestSuite() {
    delete certs_;
    certs_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(certs_->error().empty()) << certs_->error();
    ServerOptions options{.extra_args = Args(), .metrics = true, .token = Token()};
    server_ = std::make_unique<ServerProcess>(options);
    ASSERT_TRUE(server_->ready()) << "gpujoind did not become ready; log:\n" << server_->log();
  }
  virtual std::vector<std::string> Args() { return {}; }
  virtual std::string Token() { return ""; }

  std::vector<std::string> MutualTlsArgs() const {
    return {"--tls-cert=" + certs_->Path("server.pem"), "--tls-key=" + certs_->Path("server.key"),
            "--tls-client-ca=" + certs_->Path("ca.pem")};
  }
  std::shared_ptr<grpc::Channel> Tls(const std::string& client = "") const {
    return TlsChannel(*certs_, server_->grpc_address(), client);
  }

  static Certificates* certs_;
  std::unique_ptr<ServerProcess> server_;
};

Certificates* TlsFixture::certs_ = nullptr;

// ---------------------------------------------------------------- mutual TLS

class MutualTlsTest : public TlsFixture {
 protected:
  std::vector<std::string> Args() override { return MutualTlsArgs(); }
};

TEST_F(MutualTlsTest, AcceptsAClientCertificateSignedByTheCa) {
  grpc::Status s = GetServerInfo(Tls("client"));
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  EXPECT_EQ(HealthStatus(Tls("client")), 1);
  EXPECT_THAT(server_->log(), HasSubstr("TLS: mutual (--tls-client-ca)"));
}

TEST_F(MutualTlsTest, RefusesAClientWithoutACertificate) {
  grpc::Status s = GetServerInfo(Tls());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // Health too: the handshake refuses the connection before any service.
  EXPECT_EQ(HealthStatus(Tls()), -static_cast<int>(grpc::StatusCode::UNAVAILABLE));
}

TEST_F(MutualTlsTest, RefusesACertificateFromAnotherCa) {
  grpc::Status s = GetServerInfo(Tls("rogue"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // The good certificate still works on the same server afterwards.
  EXPECT_TRUE(GetServerInfo(Tls("client")).ok());
}

TEST_F(MutualTlsTest, PlaintextClientsAreRefused) {
  EXPECT_EQ(GetServerInfo(PlainChannel(server_->grpc_address())).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(MutualTlsTest, ClientLibraryPresentsItsCertificate) {
  client::ConnectOptions o;
  o.address = server_->grpc_address();
  o.tls_ca_file = certs_->Path("ca.pem");
  o.tls_client_cert_file = certs_->Path("client.pem");
  o.tls_client_key_file = certs_->Path("client.key");
  o.own_connection = true;
  o.deadline = std::chrono::seconds(10);
  auto good = client::Client::Connect(o);
  ASSERT_TRUE(good.ok()) << good.status();
  auto info = (*good)->GetServerInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->backend, "cpu");

  o.tls_client_cert_file = certs_->Path("rogue.pem");
  o.tls_client_key_file = certs_->Path("rogue.key");
  auto rogue = client::Client::Connect(o);
  ASSERT_TRUE(rogue.ok()) << rogue.status();
  EXPECT_EQ((*rogue)->GetServerInfo().status().code(), absl::StatusCode::kUnavailable);

  o.tls_client_cert_file.clear();
  o.tls_client_key_file.clear();
  auto none = client::Client::Connect(o);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ((*none)->GetServerInfo().status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(MutualTlsTest, CliPresentsItsCertificate) {
  const std::vector<std::string> base = {
      GPUJOIN_CLI_BIN, "--server", server_->grpc_address(), "--tls-ca", certs_->Path("ca.pem"),
      "--timeout",     "10"};
  std::vector<std::string> good = base;
  good.insert(good.end(), {"--tls-client-cert", certs_->Path("client.pem"), "--tls-client-key",
                           certs_->Path("client.key"), "info"});
  RunResult r = RunProcess(good, {.timeout = std::chrono::seconds(30)});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("cpu"));

  std::vector<std::string> none = base;
  none.push_back("info");
  r = RunProcess(none, {.timeout = std::chrono::seconds(30)});
  EXPECT_EQ(r.code, 1) << r.out << r.err;  // an RPC error
  EXPECT_THAT(r.err, HasSubstr("UNAVAILABLE"));

  std::vector<std::string> half = base;
  half.insert(half.end(), {"--tls-client-cert", certs_->Path("client.pem"), "info"});
  r = RunProcess(half, {.timeout = std::chrono::seconds(30)});
  EXPECT_EQ(r.code, 2) << r.out << r.err;  // a usage error
  EXPECT_THAT(r.err, HasSubstr("private key"));
}

TEST_F(MutualTlsTest, LoadtestPresentsItsCertificate) {
  std::vector<std::string> args = {GPUJOIN_LOADTEST_BIN,
                                   "--server",
                                   server_->grpc_address(),
                                   "--tls-ca",
                                   certs_->Path("ca.pem"),
                                   "--rpc",
                                   "aggregate",
                                   "--groups",
                                   "16",
                                   "--batch-rows",
                                   "1K",
                                   "--concurrency",
                                   "1",
                                   "--requests",
                                   "4",
                                   "--duration",
                                   "30",
                                   "--warmup",
                                   "0"};
  std::vector<std::string> good = args;
  good.insert(good.end(), {"--tls-client-cert", certs_->Path("client.pem"), "--tls-client-key",
                           certs_->Path("client.key")});
  RunResult r = RunProcess(good, {.timeout = std::chrono::seconds(60)});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  r = RunProcess(args, {.timeout = std::chrono::seconds(60)});
  EXPECT_NE(r.code, 0) << r.out << r.err;
}

// ---------------------------------------------------------------- --auth-scope=all

class StrictAuthTest : public TlsFixture {
 protected:
  std::vector<std::string> Args() override { return {"--auth-scope=all"}; }
  std::string Token() override { return kToken; }
  std::shared_ptr<grpc::Channel> Plain() const { return PlainChannel(server_->grpc_address()); }
};

TEST_F(StrictAuthTest, ReflectionNeedsTheToken) {
  StreamResult none = Reflect(Plain(), {kListServices});
  EXPECT_EQ(none.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(none.status.error_message(), HasSubstr("missing"));
  EXPECT_TRUE(none.responses.empty());

  StreamResult wrong = Reflect(Plain(), {kListServices}, "wrong");
  EXPECT_EQ(wrong.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.status.error_message(), HasSubstr("invalid bearer token"));
  EXPECT_TRUE(wrong.responses.empty());

  // With the token: two requests on one stream, answered in order by the
  // relayed reflection service.
  StreamResult good = Reflect(Plain(), {kListServices, kFileOfGpuJoin}, kToken);
  ASSERT_TRUE(good.status.ok()) << good.status.error_message();
  ASSERT_EQ(good.responses.size(), 2u);
  EXPECT_THAT(good.responses[0], HasSubstr("gpujoin.v1.GpuJoin"));
  EXPECT_THAT(good.responses[0], HasSubstr("grpc.health.v1.Health"));
  EXPECT_THAT(good.responses[1], HasSubstr("gpujoin/v1/gpujoin.proto"));
  EXPECT_THAT(good.responses[1], HasSubstr("LookupRequest"));
  EXPECT_THAT(server_->log(), HasSubstr("--auth-scope=all"));
}

TEST_F(StrictAuthTest, ManyReflectionRequestsOnOneStreamAreAllAnsweredInOrder) {
  std::vector<std::string> requests;
  for (int i = 0; i < 100; ++i) requests.push_back(i % 2 == 0 ? kListServices : kFileOfGpuJoin);
  StreamResult r = Reflect(Plain(), requests, kToken);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.responses.size(), requests.size());
  for (size_t i = 0; i < r.responses.size(); ++i) {
    EXPECT_THAT(r.responses[i],
                HasSubstr(i % 2 == 0 ? "grpc.health.v1.Health" : "gpujoin/v1/gpujoin.proto"))
        << i;
  }
}

// A caller that goes away mid-stream (its deadline passes while the stream is
// open) ends the relayed call; the guard keeps serving.
TEST_F(StrictAuthTest, AbandonedReflectionStreamDoesNotHurtTheNextOne) {
  for (int i = 0; i < 5; ++i) {
    auto channel = Plain();
    grpc::GenericStub stub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
    grpc::CompletionQueue cq;
    auto call = stub.PrepareCall(&ctx,
                                 "/grpc.reflection.v1alpha.ServerReflection/"
                                 "ServerReflectionInfo",
                                 &cq);
    void* tag = nullptr;
    bool ok = false;
    call->StartCall(reinterpret_cast<void*>(1));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    grpc::Slice slice(kListServices);
    grpc::ByteBuffer request(&slice, 1), response;
    call->Write(request, reinterpret_cast<void*>(2));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    call->Read(&response, reinterpret_cast<void*>(3));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_TRUE(ok);  // one answer, then the stream is left open until the deadline
    grpc::Status status;
    call->Finish(&status, reinterpret_cast<void*>(4));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  StreamResult good = Reflect(Plain(), {kListServices}, kToken);
  ASSERT_TRUE(good.status.ok()) << good.status.error_message();
  EXPECT_EQ(good.responses.size(), 1u);
  // No relayed call is left behind: SIGTERM drains at once (--drain-timeout is 10 s).
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server_->StopWith(SIGTERM), 0) << server_->log();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(StrictAuthTest, ReflectionStreamWithoutRequestsEndsOk) {
  StreamResult empty = Reflect(Plain(), {}, kToken);
  EXPECT_TRUE(empty.status.ok()) << empty.status.error_message();
  EXPECT_TRUE(empty.responses.empty());
}

TEST_F(StrictAuthTest, UnknownMethodsStayUnimplemented) {
  for (const std::string token : {"", kToken}) {
    StreamResult r = Reflect(Plain(), {kListServices}, token, "/no.such.Service/Method");
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << token;
  }
}

TEST_F(StrictAuthTest, MetricsNeedTheBearerHeader) {
  const std::string address = server_->metrics_address();
  HttpResponse none = HttpGet(address, "/metrics");
  EXPECT_EQ(none.status, 401) << none.head;
  EXPECT_THAT(none.head, HasSubstr("WWW-Authenticate: Bearer"));
  EXPECT_THAT(none.body, Not(HasSubstr("gpujoin_")));
  for (const std::string bad : {"Bearer wrong", "Basic bXRscy10MGtlbg==", "Bearer"}) {
    HttpResponse r = HttpGet(address, "/metrics", bad);
    EXPECT_EQ(r.status, 401) << bad;
    EXPECT_THAT(r.body, Not(HasSubstr("gpujoin_"))) << bad;
  }
  HttpResponse good = HttpGet(address, "/metrics", std::string("Bearer ") + kToken);
  EXPECT_EQ(good.status, 200) << good.head;
  EXPECT_THAT(good.body, HasSubstr("gpujoin_serving 1"));
}

TEST_F(StrictAuthTest, HealthStaysOpenAndGpuJoinCallsStillNeedTheToken) {
  EXPECT_EQ(HealthStatus(Plain()), 1);
  EXPECT_EQ(GetServerInfo(Plain()).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(GetServerInfo(Plain(), kToken).ok());
}

// The default scope keeps reflection and /metrics open (today's behaviour).
class DefaultScopeTest : public TlsFixture {
 protected:
  std::string Token() override { return kToken; }
};

TEST_F(DefaultScopeTest, ReflectionAndMetricsStayOpen) {
  StreamResult r = Reflect(PlainChannel(server_->grpc_address()), {kListServices});
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(r.responses.size(), 1u);
  EXPECT_THAT(r.responses[0], HasSubstr("gpujoin.v1.GpuJoin"));
  HttpResponse m = HttpGet(server_->metrics_address(), "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_THAT(m.body, HasSubstr("gpujoin_serving 1"));
  EXPECT_EQ(GetServerInfo(PlainChannel(server_->grpc_address())).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(server_->log(), HasSubstr("--auth-scope=rpc"));
}

// Both together: the reflection guard works the same under TLS credentials.
class MutualTlsStrictAuthTest : public TlsFixture {
 protected:
  std::vector<std::string> Args() override {
    std::vector<std::string> a = MutualTlsArgs();
    a.push_back("--auth-scope=all");
    return a;
  }
  std::string Token() override { return kToken; }
};

TEST_F(MutualTlsStrictAuthTest, ReflectionOverMutualTlsNeedsTheToken) {
  StreamResult none = Reflect(Tls("client"), {kListServices});
  EXPECT_EQ(none.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  StreamResult good = Reflect(Tls("client"), {kListServices}, kToken);
  ASSERT_TRUE(good.status.ok()) << good.status.error_message();
  ASSERT_EQ(good.responses.size(), 1u);
  EXPECT_THAT(good.responses[0], HasSubstr("gpujoin.v1.GpuJoin"));
  // Without a client certificate the token does not help: no handshake.
  EXPECT_EQ(Reflect(Tls(), {kListServices}, kToken).status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(HealthStatus(Tls("client")), 1);
}

// ---------------------------------------------------------------- startup

TEST(TlsStartup, UnusableClientCaFilesFailClearly) {
  Certificates certs;
  ASSERT_TRUE(certs.error().empty()) << certs.error();
  const std::vector<std::string> base = {gpujoin::testing::GpujoindBinary(),
                                         "--listen=127.0.0.1:0",
                                         "--metrics-listen=none",
                                         "--backend=cpu",
                                         "--tls-cert=" + certs.Path("server.pem"),
                                         "--tls-key=" + certs.Path("server.key")};
  std::vector<std::string> args = base;
  args.push_back("--tls-client-ca=/nonexistent/ca.pem");
  RunResult r = RunProcess(args, {.timeout = std::chrono::seconds(30)});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err + r.out, HasSubstr("--tls-client-ca: cannot read \"/nonexistent/ca.pem\""));

  args = base;
  args.push_back("--tls-client-ca=" + certs.Path("openssl.cnf"));  // not PEM
  r = RunProcess(args, {.timeout = std::chrono::seconds(30)});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err + r.out, HasSubstr("holds no PEM certificate"));

  r = RunProcess({gpujoin::testing::GpujoindBinary(), "--tls-client-ca=" + certs.Path("ca.pem")},
                 {.timeout = std::chrono::seconds(30)});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tls-client-ca requires --tls-cert"));
}

}  // namespace
}  // namespace gpujoin::server
