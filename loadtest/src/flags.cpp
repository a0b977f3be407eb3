#include "flags.hpp"

namespace gpujoin::loadtest {

void AddFlags(CLI::App& app, Flags& f) {
  app.add_option("--server", f.server, "gpujoind address (host:port or unix:/path)")
      ->capture_default_str();
  app.add_option("--token", f.token, "bearer token sent with every call");
  app.add_option("--tls-ca", f.tls_ca, "PEM roots for a TLS server (empty = plaintext)");
  app.add_option("--tls-server-name", f.tls_name, "name checked against the TLS certificate");
  app.add_option("--tls-client-cert", f.tls_client_cert,
                 "PEM certificate chain presented to a server that requires client "
                 "certificates (gpujoind --tls-client-ca); with --tls-client-key");
  app.add_option("--tls-client-key", f.tls_client_key, "PEM private key of --tls-client-cert");
  app.add_option("--rpc", f.rpc_name,
                 "lookup | join | aggregate | mutate (upserts of --batch-rows keys drawn like "
                 "a lookup's: hits re-assign their value, misses insert theirs)")
      ->check(CLI::IsMember({"lookup", "join", "aggregate", "mutate"}))
      ->capture_default_str();
  app.add_option("--index", f.index, "index to query (lookup, join)")->capture_default_str();
  app.add_option("--build-keys", f.build_keys_text,
                 "build --index first with this many keys (e.g. 1M) and check every sampled "
                 "answer value by value; without it the index must exist and only the "
                 "structure of answers is checked");
  app.add_option("--load-factor", f.load_factor, "target load factor of the built index")
      ->capture_default_str();
  app.add_flag("--keep-index", f.keep_index, "do not drop the index built with --build-keys");
  app.add_option("--batch-rows", f.batch_rows_text, "rows per batch, a list: 1K,64K,1M")
      ->capture_default_str();
  app.add_option("--concurrency", f.concurrency_text, "streams, a list: 1,4,16")
      ->capture_default_str();
  app.add_option("--concurrency-range", f.concurrency_range,
                 "streams as start:end:step (end inclusive); overrides --concurrency");
  app.add_option("--channels", f.channels, "connections the streams are spread over")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--in-flight", f.in_flight, "batches outstanding per stream")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--duration", f.duration,
                 "seconds measured per setting (an upper bound with "
                 "--requests)")
      ->check(CLI::Range(0.01, 3600.0))
      ->capture_default_str();
  app.add_option("--requests", f.requests, "measured batches per setting (0 = by --duration)")
      ->capture_default_str();
  app.add_option("--warmup", f.warmup, "seconds of unmeasured load before each setting")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  app.add_option("--hit-ratio", f.hit_ratio, "fraction of query keys present in the index")
      ->capture_default_str();
  app.add_option("--keyspace", f.keyspace_text,
                 "keys are drawn below this bound (default 2^32; misses from [build-keys, "
                 "keyspace))");
  app.add_option("--seed", f.seed, "seed of keys, values and batches")->capture_default_str();
  app.add_option("--key-type", f.key_type,
                 "keys of the index and the queries (lookup, join): u32; u64 drawn over the "
                 "full 64-bit range; key columns: str16 / str32 (strings of 16 / 32 hex "
                 "characters), uuid (UUID text, 36 characters), pair (two uint32 columns)")
      ->check(CLI::IsMember({"u32", "u64", "str16", "str32", "uuid", "pair"}))
      ->capture_default_str();
  f.multiplicity_option =
      app.add_option("--multiplicity", f.multiplicity,
                     "rows per key of the index built with --build-keys (a keep_all index of "
                     "build-keys x N rows; a join hit yields N pairs)")
          ->check(CLI::Range(1u, 1u << 20));
  app.add_flag("--payload", f.payload,
               "the index built with --build-keys gets two payload columns (lt_int64 INT64, "
               "lt_tag STRING of 4-11 bytes) and every lookup selects them; the echo and "
               "--redis answer the same bytes");
  app.add_flag("--replicated", f.replicated,
               "the index built with --build-keys is replicated (IndexSpec.placement): through "
               "gpujoin-router or gpujoind --devices each batch runs whole on one replica");
  app.add_option("--join-kind", f.join_kind, "join: inner | left_outer | left_semi | left_anti")
      ->check(CLI::IsMember({"inner", "left_outer", "left_semi", "left_anti"}))
      ->capture_default_str();
  app.add_option("--mutate-streams", f.mutate_streams,
                 "Mutate streams beside each setting's lookup streams (--rpc lookup), measured "
                 "in the same window and reported as a row of their own")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  app.add_option("--mutate-rows", f.mutate_rows_text,
                 "upsert rows per batch of the --mutate-streams (default: the setting's "
                 "--batch-rows)");
  app.add_option("--groups", f.groups, "aggregate: number of groups")->capture_default_str();
  app.add_option("--agg-op", f.agg_op, "aggregate: count | sum | min | max | mean")
      ->check(CLI::IsMember({"count", "sum", "min", "max", "mean"}))
      ->capture_default_str();
  app.add_option("--verify-every", f.verify_every,
                 "check every n-th answer of a stream value by value (all answers are "
                 "checked structurally)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_flag("--echo", f.echo, "also measure every setting against the in-process echo service");
  app.add_flag("--echo-only", f.echo_only, "measure only the echo service (no server needed)");
  app.add_option("--redis", f.redis,
                 "also measure every setting against the Redis server at this host:port, "
                 "loaded first with the --build-keys mapping (FLUSHDB, then MSET; its database "
                 "is replaced): one connection per stream, one MGET per batch (--rpc lookup, "
                 "--key-type u32)");
  app.add_flag("--json", f.json, "print JSON instead of the table");
  app.add_option("--json-file", f.json_file, "also write the JSON document to this file");
  app.add_option("--max-message-bytes", f.max_message_bytes, "largest gRPC message either way")
      ->check(CLI::Range(1 << 20, 1 << 30))
      ->capture_default_str();
}

}  // namespace gpujoin::loadtest
