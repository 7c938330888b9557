// wgllm bench serve --url http://127.0.0.1:8080 [--concurrency 1,4,16,64] [--requests N | --requests-per-client N]
//                   [--max-tokens N] [--prompt-words N] [--api-key KEY] [--json FILE]
// For each concurrency C, C client threads send streaming chat completions (greedy, end of
// generation ignored, so every request generates exactly --max-tokens) to the server until
// --requests have been sent at that level, and the tool reports per level: aggregate decode
// throughput (generated tokens / wall time), time to first token and inter-token latency p50 / p99
// (client side: from sending the request to the first content chunk; between content chunks;
// tokens counted from the usage chunk, stream_options.include_usage), and errors. Any OpenAI-compatible server can be measured (wgllm serve, llama-server), so two can be
// compared on the same machine and model. Each prompt is distinct (its index first) so prefix
// caches do not turn the load into cache hits. One JSON row per level.
#include "bench_serve.h"

#include <httplib.h>

#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "bench/stats.h"
#include "core/error.h"
#include "validate.h"

namespace wgllm::cli {

namespace {

struct Opts {
  std::string url = "http://127.0.0.1:8080", api_key, json_path, concurrency = "1,4,16";
  uint32_t requests = 0;            // per level; 0: per_client x concurrency
  uint32_t per_client = 2;          // requests per client thread when `requests` is 0
  uint32_t max_tokens = 64, prompt_words = 32;
};

struct RequestResult {
  bool ok = false;
  std::string error;
  double ttft_ms = 0;
  double start_ms = 0, end_ms = 0;  // sent and finished, from the start of its concurrency level
  std::vector<double> itl_ms;
  uint32_t chunks = 0;        // content chunks received (about one per token; tokens whose text is not
                              // complete yet, e.g. part of a UTF-8 sequence, come with a later chunk)
  uint32_t usage_tokens = 0;  // completion_tokens of the usage chunk (0 if the server sent none)
  uint32_t tokens() const { return usage_tokens ? usage_tokens : chunks; }
};

RequestResult one_request(const Opts& o, const std::string& host_port, size_t index) {
  using clock = std::chrono::steady_clock;
  RequestResult r;
  httplib::Client cli(host_port);
  cli.set_read_timeout(600, 0);
  std::string prompt = fmt::format("Request {}. Write a long story about", index);
  for (uint32_t i = 0; i < o.prompt_words; ++i) prompt += " the sea";
  nlohmann::json body = {{"model", "any"}, {"messages", {{{"role", "user"}, {"content", prompt}}}},
                         {"max_tokens", o.max_tokens}, {"temperature", 0}, {"stream", true}, {"ignore_eos", true},
                         {"stream_options", {{"include_usage", true}}}};
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!o.api_key.empty()) req.set_header("Authorization", "Bearer " + o.api_key);
  std::string buf;
  const auto t0 = clock::now();
  auto last = t0;
  bool done = false;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buf.append(data, len);
    for (size_t nl; (nl = buf.find("\n\n")) != std::string::npos;) {
      const std::string ev = buf.substr(0, nl);
      buf.erase(0, nl + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      const std::string payload = ev.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      const auto j = nlohmann::json::parse(payload, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) {
        r.error = j["error"].dump();
        return false;
      }
      if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens"))
        r.usage_tokens = j["usage"]["completion_tokens"].get<uint32_t>();
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const auto& d = j["choices"][0]["delta"];
      if (!d.contains("content") || !d["content"].is_string() || d["content"].get<std::string>().empty()) continue;
      const auto now = clock::now();
      if (r.chunks == 0)
        r.ttft_ms = std::chrono::duration<double, std::milli>(now - t0).count();
      else
        r.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
      ++r.chunks;
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(req, res, err);
  if (!sent && r.error.empty()) r.error = httplib::to_string(err);
  if (sent && res.status != 200) r.error = fmt::format("HTTP {}: {}", res.status, res.body);
  r.ok = sent && res.status == 200 && done && r.error.empty();
  if (r.ok == false && r.error.empty()) r.error = "stream ended without [DONE]";
  return r;
}

int run(const Opts& o) {
  // "http://host:port" -> "host:port" for httplib::Client (plain HTTP only).
  std::string hp = o.url;
  if (hp.rfind("http://", 0) == 0) hp = hp.substr(7);
  else if (hp.find("://") != std::string::npos) throw Error("bench serve: only http:// URLs are supported");
  while (!hp.empty() && hp.back() == '/') hp.pop_back();
  std::vector<uint32_t> levels;
  {
    std::stringstream ss(o.concurrency);
    for (std::string t; std::getline(ss, t, ',');) {
      char* end = nullptr;
      const unsigned long v = std::strtoul(t.c_str(), &end, 10);
      if (t.empty() || *end || v < 1 || v > 1024) throw Error("bench serve: --concurrency takes integers in 1..1024, e.g. 1,4,16");
      levels.push_back(uint32_t(v));
    }
  }
  nlohmann::json rows = nlohmann::json::array();
  size_t index = 0, failed = 0;
  fmt::print(stderr, "| concurrency | requests | errors | tok/s (aggregate) | TTFT p50 / p99 ms | ITL p50 / p99 ms |\n|---|---|---|---|---|---|\n");
  for (uint32_t c : levels) {
    const uint32_t n = o.requests ? o.requests : o.per_client * c;
    std::vector<RequestResult> res(n);
    std::atomic<uint32_t> next{0};
    const size_t base = index;
    index += n;
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> th;
    for (uint32_t t = 0; t < c; ++t)
      th.emplace_back([&] {
        for (uint32_t i; (i = next++) < n;) {
          const auto ts = std::chrono::steady_clock::now();
          res[i] = one_request(o, hp, base + i);
          res[i].start_ms = std::chrono::duration<double, std::milli>(ts - t0).count();
          res[i].end_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        }
      });
    for (auto& t : th) t.join();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> ttft, itl;
    uint64_t tokens = 0, errors = 0;
    std::string first_error;
    for (auto& r : res) {
      if (!r.ok) {
        if (!errors++) first_error = r.error;
        continue;
      }
      ttft.push_back(r.ttft_ms);
      itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
      tokens += r.tokens();
    }
    failed += errors;
    auto q = [](const std::vector<double>& v, double p) { return v.empty() ? 0.0 : bench::quantile(v, p); };
    nlohmann::json row = {{"url", o.url}, {"concurrency", c}, {"requests", n}, {"errors", errors},
                          {"max_tokens", o.max_tokens}, {"prompt_words", o.prompt_words}, {"wall_s", wall},
                          {"generated_tokens", tokens}, {"tokens_per_s", wall > 0 ? tokens / wall : 0.0},
                          {"ttft_ms_p50", q(ttft, 0.5)}, {"ttft_ms_p99", q(ttft, 0.99)},
                          {"itl_ms_p50", q(itl, 0.5)}, {"itl_ms_p99", q(itl, 0.99)}};
    if (errors) row["first_error"] = first_error;
    // Per request (in the order sent): when it was sent, its TTFT and when it ended (ms from the
    // level's start; TTFT 0 for a failed request), to see which requests make the TTFT tail.
    nlohmann::json per = nlohmann::json::array();
    for (const auto& r : res)
      per.push_back({{"start_ms", r.start_ms}, {"ttft_ms", r.ok ? r.ttft_ms : 0.0}, {"end_ms", r.end_ms}, {"ok", r.ok}});
    row["per_request"] = per;
    rows.push_back(row);
    fmt::print(stderr, "| {} | {} | {} | {:.1f} | {:.1f} / {:.1f} | {:.2f} / {:.2f} |\n", c, n, errors,
               row["tokens_per_s"].get<double>(), q(ttft, 0.5), q(ttft, 0.99), q(itl, 0.5), q(itl, 0.99));
    if (errors) fmt::print(stderr, "  first error: {}\n", first_error);
  }
  if (o.json_path.empty())
    std::cout << rows.dump(1) << std::endl;
  else
    write_file(o.json_path, rows.dump(1) + "\n");
  return failed ? 1 : 0;
}

}  // namespace

std::function<int()> add_bench_serve(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto o = std::make_shared<Opts>();
  auto* cmd = bench->add_subcommand("serve", "load test of an OpenAI-compatible server: throughput, TTFT and ITL vs concurrency");
  cmd->add_option("--url", o->url, "the server (http://HOST:PORT; default http://127.0.0.1:8080)")->check(NonEmpty);
  cmd->add_option("--concurrency", o->concurrency, "comma-separated client counts (default 1,4,16)")->check(NonEmpty);
  auto* req = cmd->add_option("--requests", o->requests, "requests per concurrency level (default: --requests-per-client x concurrency)")
      ->transform(integer(1, 1u << 20));
  cmd->add_option("--requests-per-client", o->per_client,
                  "requests per level = this x the concurrency, when --requests is not given (default 2)")
      ->transform(integer(1, 1u << 16))
      ->excludes(req);
  cmd->add_option("--max-tokens", o->max_tokens, "tokens generated per request (end of generation ignored; default 64)")
      ->transform(integer(1, 1u << 20));
  cmd->add_option("--prompt-words", o->prompt_words, "words of filler in each prompt (default 32)")->transform(integer(0, 1u << 20));
  cmd->add_option("--api-key", o->api_key, "sent as 'Authorization: Bearer KEY'");
  add_json_option(cmd, o->json_path, "the rows");
  return [o, cmd]() -> int { return *cmd ? run(*o) : -1; };
}

}  // namespace wgllm::cli
