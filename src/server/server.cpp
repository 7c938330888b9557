#include "server/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <thread>

#include <fmt/core.h>

#include "chat/chat_template.h"
#include "chat/jinja_value.h"  // TemplateRaise
#include "core/error.h"
#include "models/model.h"
#include "server/api.h"
#include "tokenizer/tokenizer.h"

namespace wgllm::server {

using nlohmann::json;

namespace {

/// Seconds a connection may stay idle before its (next) request: long enough for a slow client's
/// first request, short enough that idle keep-alive connections return their workers soon.
constexpr time_t kKeepAliveSeconds = 10;

#ifdef __linux__
std::string address_text(const sockaddr_storage& a, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* v = reinterpret_cast<const sockaddr_in*>(&a);
    port = ntohs(v->sin_port);
    return inet_ntop(AF_INET, &v->sin_addr, buf, sizeof buf) ? buf : "";
  }
  if (a.ss_family == AF_INET6) {
    const auto* v = reinterpret_cast<const sockaddr_in6*>(&a);
    port = ntohs(v->sin6_port);
    return inet_ntop(AF_INET6, &v->sin6_addr, buf, sizeof buf) ? buf : "";
  }
  return "";
}

/// Calls fn(fd, local address, peer address or nullptr for an unconnected socket) for every socket
/// of this process (Linux: /proc/self/fd) until fn returns true. cpp-httplib 0.11 (Debian bookworm's)
/// gives its users no access to its sockets: neither a handler to its connection nor the server to
/// its listening socket or accepted connections, so they are found here by their addresses.
template <typename Fn>
void for_each_socket(Fn fn) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (*end || end == e->d_name || fd == dirfd(d)) continue;
    sockaddr_storage peer{}, self{};
    socklen_t pl = sizeof peer, sl = sizeof self;
    if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&self), &sl) != 0) continue;
    const bool connected = getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &pl) == 0;
    if (fn(int(fd), self, connected ? &peer : nullptr)) break;
  }
  closedir(d);
}
#endif

/// The descriptor of the connection a request came on, or -1: the socket whose local and remote
/// address and port are the request's. The handler's thread owns the connection until it returns,
/// so the descriptor cannot be closed or reused meanwhile.
int request_socket(const httplib::Request& req) {
  int found = -1;
#ifdef __linux__
  for_each_socket([&](int fd, const sockaddr_storage& self, const sockaddr_storage* peer) {
    int pp = -1, sp = -1;
    if (peer && address_text(*peer, pp) == req.remote_addr && pp == req.remote_port &&
        address_text(self, sp) == req.local_addr && sp == req.local_port)
      found = fd;
    return found >= 0;
  });
#endif
  return found;
}

/// Raises the listening socket's backlog on `port` to SOMAXCONN (Linux applies a second listen()
/// to a listening socket as a new backlog). cpp-httplib 0.11 listens with a backlog of 5
/// (CPPHTTPLIB_LISTEN_BACKLOG, fixed when Debian built the library): with 64 clients connecting at
/// once the rest of the handshakes were dropped and retried by the clients' kernels a second or
/// more later.
void raise_listen_backlog(int port) {
#ifdef __linux__
  for_each_socket([&](int fd, const sockaddr_storage& self, const sockaddr_storage* peer) {
    int listening = 0, sp = -1;
    socklen_t len = sizeof listening;
    if (peer || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) return false;
    address_text(self, sp);
    if (sp == port) ::listen(fd, SOMAXCONN);
    return sp == port;
  });
#else
  (void)port;
#endif
}

/// Shuts down (SHUT_RDWR, without closing: the descriptors stay cpp-httplib's) every connection
/// accepted on `port`, so the workers waiting on idle keep-alive connections wake at once and the
/// server's stop() does not wait out the keep-alive timeout. Called once the listening socket is
/// closed and the streams have ended.
void shutdown_connections(int port) {
#ifdef __linux__
  for_each_socket([&](int fd, const sockaddr_storage& self, const sockaddr_storage* peer) {
    int sp = -1;
    address_text(self, sp);
    if (peer && sp == port) ::shutdown(fd, SHUT_RDWR);
    return false;
  });
#else
  (void)port;
#endif
}

/// True once the peer of socket fd has closed the connection (or it failed). A client that only
/// half-closes (shutdown(SHUT_WR) after its request, as `nc -N` does) looks the same from here
/// until a write fails, and a whole (non-streamed) answer writes nothing before the end: such a
/// client's generation is cancelled too. Streamed answers notice a gone client by a failed write.
bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

// SIGINT and SIGTERM: the signals that stop the server (blocked in every thread, taken by sigwait).
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// The listening socket's options. cpp-httplib's defaults set SO_REUSEPORT, which lets a second
// server bind a port another one listens on (the two then split the connections): only SO_REUSEADDR
// here, so a busy port fails to bind (a port in TIME_WAIT still binds).
void set_listen_options(int fd) {
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

json chat_logprobs(const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const auto& lp : lps) {
    json top = json::array();
    for (const auto& t : lp.top) top.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_of(t.token)}});
    content.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"bytes", bytes_of(lp.token)}, {"top_logprobs", top}});
  }
  return json{{"content", content}};
}

/// A token's text as the completions API spells it: itself when valid UTF-8, else OpenAI's
/// "bytes:\xNN..." form (a token can be part of a character; as U+FFFD, the top_logprobs keys of
/// different partial tokens would collide).
std::string token_text(const std::string& t) {
  if (!validate_utf8(t)) return t;
  std::string out = "bytes:";
  for (unsigned char c : t) out += fmt::format("\\x{:02x}", c);
  return out;
}

/// Completions' logprobs object; text_offset counts bytes from `offset`.
json completion_logprobs(const std::vector<TokenLogprob>& lps, size_t offset) {
  json tokens = json::array(), lp = json::array(), top = json::array(), off = json::array();
  for (const auto& t : lps) {
    tokens.push_back(token_text(t.token));
    lp.push_back(t.logprob);
    json m = json::object();
    for (const auto& x : t.top) m[token_text(x.token)] = x.logprob;
    top.push_back(m);
    off.push_back(offset);
    offset += t.token.size();
  }
  return json{{"tokens", tokens}, {"token_logprobs", lp}, {"top_logprobs", top}, {"text_offset", off}};
}

class Server {
 public:
  Server(Model& model, const Tokenizer& tok, const ChatTemplate* tmpl, const ServerOptions& opt)
      : model_(model), tok_(tok), tmpl_(tmpl), opt_(opt), sched_(model, tok, opt.scheduler, metrics_) {
    created_ = std::time(nullptr);
  }

  int run();

 private:
  void routes();
  void answer_error(httplib::Response& res, const ApiError& e);
  std::optional<ApiError> early_error(const httplib::Request& req) const;
  void generate(const httplib::Request& req, httplib::Response& res, bool chat);
  json usage(const Job& j) const;

  Model& model_;
  const Tokenizer& tok_;
  const ChatTemplate* tmpl_;
  ServerOptions opt_;
  Metrics metrics_;
  Scheduler sched_;
  httplib::Server http_;
  std::map<std::string, std::string> methods_;  // the method of each plain endpoint path (405 answers)
  std::time_t created_ = 0;
  std::atomic<bool> shutting_down_{false};
  std::atomic<uint64_t> next_id_{1};
  std::atomic<int> in_flight_{0};  // HTTP generation handlers not yet finished (streams included)
};

void Server::answer_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status >= 400 && e.status < 500) ++metrics_.http_errors_4xx;
  if (e.status == 429) res.set_header("Retry-After", "1");
  res.set_content(dump(error_body(e)), "application/json");
}

// What is refused from a request's headers alone, before its body is read:
//  - a body framed other than by one Content-Length (RFC 9112 section 6): cpp-httplib 0.11 reads a chunked
//    body without the body limit and, with neither header, reads a POST's body until the client closes: 411;
//  - a Content-Length that is not a decimal number (it read 'abc' as 0), or several that differ: 400;
//  - one over the body limit: 413 at once (it waited for a negative or huge one until the 30 s read timeout);
//  - a missing or wrong API key (except /health): 401.
std::optional<ApiError> Server::early_error(const httplib::Request& req) const {
  if (req.has_header("Transfer-Encoding"))
    return ApiError(411, "request bodies are taken with a Content-Length only (no Transfer-Encoding)");
  if (req.has_header("Content-Length")) {
    const std::string cl = req.get_header_value("Content-Length");
    for (size_t i = 1; i < req.get_header_value_count("Content-Length"); ++i)
      if (req.get_header_value("Content-Length", i) != cl) return ApiError(400, "differing Content-Length headers");
    if (cl.empty() || cl.find_first_not_of("0123456789") != std::string::npos)
      return ApiError(400, fmt::format("malformed Content-Length '{}': a decimal byte count", escape_nul(cl)));
    const size_t nz = std::min(cl.find_first_not_of('0'), cl.size());  // leading zeros are allowed
    if (cl.size() - nz > 19 || std::stoull(cl) > opt_.max_body_bytes)
      return ApiError(413, fmt::format("the request body is too large ({} bytes, at most {})", cl.substr(nz),
                                       opt_.max_body_bytes));
  } else if (req.method == "POST") {
    return ApiError(411, "a POST needs a Content-Length");
  }
  if (opt_.api_key.empty() || req.path == "/health") return std::nullopt;
  const std::string auth = req.get_header_value("Authorization");
  // The scheme name is case-insensitive (RFC 7235 section 2.1), the key is not.
  if (auth.size() == 7 + opt_.api_key.size() && strncasecmp(auth.c_str(), "Bearer ", 7) == 0 &&
      auth.compare(7, std::string::npos, opt_.api_key) == 0)
    return std::nullopt;
  return ApiError(401, auth.empty() ? "missing API key (send 'Authorization: Bearer KEY')" : "incorrect API key", "",
                  "invalid_api_key");
}

json Server::usage(const Job& j) const {
  return json{{"prompt_tokens", j.prompt.size()},
              {"completion_tokens", j.completion_tokens},
              {"total_tokens", j.prompt.size() + j.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", j.cached_tokens}}}};
}

void Server::generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  if (shutting_down_) throw ApiError(503, "the server is shutting down", "", "", "server_error");
  const json body = parse_body(req.body);
  ParsedRequest r = chat ? parse_chat_request(body, opt_.defaults) : parse_completion_request(body, opt_.defaults);
  std::string text = r.prompt;
  if (chat) {
    if (!tmpl_) throw ApiError(400, "this model has no chat template; use /v1/completions", "messages");
    try {
      text = tmpl_->apply(r.messages, true);
    } catch (const jinja::TemplateRaise& e) {  // raise_exception('...'): the template's own text
      throw ApiError(400, fmt::format("the chat template refused the messages: {}", e.what()), "messages");
    } catch (const std::exception& e) {  // "chat template error at LINE:COL: ..."
      throw ApiError(400, fmt::format("the messages could not be rendered: {}", e.what()), "messages");
    }
  }
  auto job = std::make_shared<Job>();
  if (r.prompt_ids) {
    for (const int32_t id : *r.prompt_ids)
      if (uint32_t(id) >= tok_.vocab_size())
        throw ApiError(400, fmt::format("token id {} in 'prompt' is not in [0, {})", id, tok_.vocab_size()), "prompt");
    job->prompt = *r.prompt_ids;
    text = tok_.decode(job->prompt);  // for echo
  } else {
    try {
      job->prompt = tok_.encode_prompt(text);
    } catch (const std::exception& e) {
      throw ApiError(400, fmt::format("the prompt cannot be tokenized: {}", e.what()), chat ? "messages" : "prompt");
    }
  }
  if (job->prompt.empty()) throw ApiError(400, "the prompt is empty (no tokens)", chat ? "messages" : "prompt");
  const uint32_t ctx = sched_.context_length();
  if (job->prompt.size() + 1 > ctx)
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, your {} resulted in {} "
                               "tokens (with room for at least one generated token).",
                               ctx, chat ? "messages" : "prompt", job->prompt.size()),
                   chat ? "messages" : "prompt", "context_length_exceeded");
  if (!r.max_tokens_given) r.params.max_tokens = ctx - uint32_t(job->prompt.size());
  job->params = r.params;
  ++metrics_.requests;  // before submit(): the job may finish before submit() returns
  metrics_.prompt_tokens += job->prompt.size();
  if (!sched_.submit(job)) {
    --metrics_.requests;
    metrics_.prompt_tokens -= job->prompt.size();
    ++metrics_.requests_rejected;
    throw ApiError(429, "the server is busy (the request queue is full); retry later", "", "rate_limit_exceeded",
                   "rate_limit_error");
  }

  const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", next_id_++);
  const std::time_t created = std::time(nullptr);
  const std::string model = opt_.model_id;
  const std::string object = chat ? "chat.completion" : "text_completion";
  if (!r.stream) {
    std::string out = r.echo ? text : "";
    std::vector<TokenLogprob> lps;
    // A client that goes away (closes, or times out) cancels its generation: checked between waits.
    std::deque<JobEvent> evs;
    const int fd = request_socket(req);
    while (!job->wait(std::chrono::milliseconds(200), evs))
      if (!job->cancel && peer_closed(fd)) job->cancel = true;
    if (job->cancel) return;  // nobody to answer
    for (auto& e : evs) {
      out += e.text;
      for (auto& l : e.logprobs) lps.push_back(std::move(l));
    }
    std::lock_guard<std::mutex> lk(job->mu);
    if (job->finish == Finish::Error) throw ApiError(500, "generation failed: " + job->error, "", "", "server_error");
    if (job->finish == Finish::Cancelled) throw ApiError(503, "the server is shutting down", "", "", "server_error");
    json choice = {{"index", 0}, {"finish_reason", finish_name(job->finish)}, {"logprobs", nullptr}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", out}};
      if (r.params.logprobs) choice["logprobs"] = chat_logprobs(lps);
    } else {
      choice["text"] = out;
      if (r.params.logprobs) choice["logprobs"] = completion_logprobs(lps, r.echo ? text.size() : 0);
    }
    json resp = {{"id", id}, {"object", object}, {"created", created}, {"model", model},
                 {"system_fingerprint", "wgllm"}, {"choices", json::array({choice})}, {"usage", usage(*job)}};
    res.set_content(dump(resp), "application/json");
    return;
  }
  // Streaming: one chunk per released piece of text, then the finish chunk, usage, [DONE].
  struct StreamState {
    bool started = false;
    std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
    size_t offset = 0;
  };
  auto st = std::make_shared<StreamState>();
  const bool include_usage = r.include_usage, logprobs = r.params.logprobs, echo = r.echo;
  ++in_flight_;
  auto chunk = [=](json choice) {
    json c = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
              {"model", model}, {"system_fingerprint", "wgllm"}, {"choices", json::array({choice})}};
    if (include_usage) c["usage"] = nullptr;
    return "data: " + dump(c) + "\n\n";
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [=, this](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& s) {
          if (!sink.write(s.data(), s.size())) {
            job->cancel = true;  // the client went away: free its slot
            return false;
          }
          st->last_write = std::chrono::steady_clock::now();
          return true;
        };
        if (!st->started) {
          st->started = true;
          json first = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
          if (chat) first["delta"] = {{"role", "assistant"}, {"content", ""}};
          else first["text"] = echo ? text : "";
          if (!write(chunk(first))) return false;
          st->offset = echo ? text.size() : 0;
        }
        std::deque<JobEvent> evs;
        const bool done = job->wait(std::chrono::milliseconds(250), evs);
        for (auto& e : evs) {
          json c = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
          if (chat) c["delta"] = {{"content", e.text}};
          else c["text"] = e.text;
          if (logprobs) c["logprobs"] = chat ? chat_logprobs(e.logprobs) : completion_logprobs(e.logprobs, st->offset);
          st->offset += e.text.size();
          if (!write(chunk(c))) return false;
        }
        if (!done) {
          if (evs.empty() && std::chrono::steady_clock::now() - st->last_write > std::chrono::seconds(1))
            return write(": keep-alive\n\n");  // notices a client that went away while waiting
          return true;
        }
        Finish f;
        std::string err;
        json u;
        {
          std::lock_guard<std::mutex> lk(job->mu);
          f = job->finish;
          err = job->error;
          u = usage(*job);
        }
        if (f == Finish::Error || f == Finish::Cancelled) {
          const ApiError e = f == Finish::Error ? ApiError(500, "generation failed: " + err, "", "", "server_error")
                                                : ApiError(503, "the server is shutting down", "", "", "server_error");
          if (!write("data: " + dump(error_body(e)) + "\n\n")) return false;
        } else {
          json c = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_name(f)}};
          if (chat) c["delta"] = json::object();
          else c["text"] = "";
          if (!write(chunk(c))) return false;
          if (include_usage) {
            json uc = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"}, {"created", created},
                       {"model", model}, {"system_fingerprint", "wgllm"}, {"choices", json::array()}, {"usage", u}};
            if (!write("data: " + dump(uc) + "\n\n")) return false;
          }
        }
        if (!write("data: [DONE]\n\n")) return false;
        sink.done();
        return true;
      },
      [job, this](bool success) {
        if (!success) job->cancel = true;
        --in_flight_;
      });
}

void Server::routes() {
  // Every handler: errors as OpenAI-shaped bodies; nothing a client sends escapes as an exception.
  auto guarded = [this](std::function<void(const httplib::Request&, httplib::Response&)> h) {
    return [this, h](const httplib::Request& req, httplib::Response& res) {
      try {
        h(req, res);
      } catch (const ApiError& e) {
        answer_error(res, e);
      } catch (const std::bad_alloc&) {
        answer_error(res, ApiError(500, "out of memory", "", "", "server_error"));
      } catch (const std::exception& e) {
        answer_error(res, ApiError(500, fmt::format("internal error: {}", e.what()), "", "", "server_error"));
      }
    };
  };
  // Registers a guarded handler and files its method for the 405 answer (regex paths are not filed).
  auto get = [&](const std::string& path, auto h) {
    http_.Get(path, guarded(h));
    if (path.find('(') == std::string::npos) methods_[path] = "GET";
  };
  auto post = [&](const std::string& path, auto h) {
    http_.Post(path, guarded(h));
    methods_[path] = "POST";
  };
  // Refusals before the body is read (early_error): answered with 'Connection: close', which tells the client
  // to close the connection (cpp-httplib 0.11 itself keeps it open until its keep-alive timeout, and would
  // read an unread body as the next request, which then fails).
  const auto refuse_early = [this](const httplib::Request& req, httplib::Response& res) {
    const auto e = early_error(req);
    if (e) {
      answer_error(res, *e);
      res.set_header("Connection", "close");
    }
    return e.has_value();
  };
  http_.set_pre_routing_handler([refuse_early](const httplib::Request& req, httplib::Response& res) {
    return refuse_early(req, res) ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
  });
  // 'Expect: 100-continue' (curl sends it for bodies over 1 MB): the same checks decide before the client
  // sends its body (cpp-httplib's default answers 100 to every such request).
  http_.set_expect_100_continue_handler([refuse_early](const httplib::Request& req, httplib::Response& res) {
    return refuse_early(req, res) ? res.status : 100;
  });
  http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // our own error bodies
    std::string msg = fmt::format("HTTP error {}", res.status);
    if (res.status == 404) {
      // A known endpoint asked with another method: 405 with the method it takes.
      msg = fmt::format("no such endpoint: {} {}", req.method, req.path);
      if (const auto m = methods_.find(req.path); m != methods_.end()) {
        res.status = 405;
        res.set_header("Allow", m->second);
        msg = fmt::format("{} takes {}, not {}", req.path, m->second, req.method);
      }
    }
    if (res.status == 413) {
      msg = fmt::format("the request body is too large (at most {} bytes)", opt_.max_body_bytes);
      // cpp-httplib reads a form-typed body (curl -d's default type) as a form, up to 8192 bytes.
      if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0)
        msg = "a body of type application/x-www-form-urlencoded (curl -d's default) is read as a form, at most 8192 "
              "bytes: send 'Content-Type: application/json'";
    }
    if (res.status >= 400 && res.status < 500) ++metrics_.http_errors_4xx;
    const ApiError e(res.status, msg);
    res.set_content(dump(error_body(e)), "application/json");
  });
  post("/v1/chat/completions", [this](auto& req, auto& res) { generate(req, res, true); });
  post("/v1/completions", [this](auto& req, auto& res) { generate(req, res, false); });
  const auto model_object = [this] {
    return json{{"id", opt_.model_id}, {"object", "model"}, {"created", created_}, {"owned_by", "wgllm"},
                {"meta", {{"context_length", sched_.context_length()}, {"vocab_size", tok_.vocab_size()},
                          {"backend", model_.backend_name()}}}};
  };
  get("/v1/models", [model_object](auto&, auto& res) {
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({model_object()})}}), "application/json");
  });
  get(R"(/v1/models/(.+))", [this, model_object](auto& req, auto& res) {
    const std::string id = req.matches[1];
    if (id != opt_.model_id)
      throw ApiError(404, fmt::format("the model '{}' does not exist (this server serves '{}')", id, opt_.model_id), "model",
                     "model_not_found");
    res.set_content(dump(model_object()), "application/json");
  });
  get("/health", [this](auto&, auto& res) {
    if (shutting_down_) throw ApiError(503, "the server is shutting down", "", "", "server_error");
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  get("/metrics", [this](auto&, auto& res) { res.set_content(metrics_.render(), "text/plain; version=0.0.4"); });
  post("/tokenize", [this](auto& req, auto& res) {
    const json b = parse_body(req.body);
    if (!b.contains("content") || !b["content"].is_string()) throw ApiError(400, "'content' must be a string", "content");
    bool special = false;
    if (b.contains("add_special")) {
      if (!b["add_special"].is_boolean()) throw ApiError(400, "'add_special' must be true or false", "add_special");
      special = b["add_special"].get<bool>();
    }
    const std::string text = b["content"].get<std::string>();
    std::vector<int32_t> ids;
    try {
      ids = special ? tok_.encode_prompt(text) : tok_.encode(text);
    } catch (const std::exception& e) {
      throw ApiError(400, fmt::format("the content cannot be tokenized: {}", e.what()), "content");
    }
    res.set_content(dump(json{{"tokens", ids}}), "application/json");
  });
  post("/detokenize", [this](auto& req, auto& res) {
    const json b = parse_body(req.body);
    if (!b.contains("tokens") || !b["tokens"].is_array()) throw ApiError(400, "'tokens' must be an array of token ids", "tokens");
    std::vector<int32_t> ids;
    for (const json& t : b["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || uint64_t(t.get<int64_t>()) >= tok_.vocab_size())
        throw ApiError(400, fmt::format("'tokens' must hold ids in [0, {})", tok_.vocab_size()), "tokens");
      ids.push_back(int32_t(t.get<int64_t>()));
    }
    res.set_content(dump(json{{"content", tok_.decode(ids)}}), "application/json");
  });
}

int Server::run() {
  routes();
  // cpp-httplib serves a connection on one worker from accept to close, so idle or slow connections
  // (headers sent a byte at a time) hold workers: beyond the slots and queue, room for many such
  // connections before /health stops answering (threads cost address space, not memory, while
  // they wait). A reverse proxy in front (README) is the fix for untrusted clients.
  const size_t threads = std::max<size_t>(256, opt_.scheduler.slots + opt_.scheduler.max_queue + 8);
  http_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_.set_payload_max_length(opt_.max_body_bytes);
  http_.set_read_timeout(30, 0);
  http_.set_write_timeout(30, 0);
  // cpp-httplib waits this long for a connection's next request, and for its FIRST one too: a client
  // slower than this between connecting and sending (a loaded machine: CI's 64 client threads on 2
  // busy cores once took > 2 s) saw the connection closed unanswered. An idle keep-alive connection
  // holds a worker this long; stop() shuts the connections down instead of waiting for them.
  http_.set_keep_alive_timeout(kKeepAliveSeconds);
  http_.set_socket_options([](socket_t sock) { set_listen_options(sock); });
  int port = opt_.port;
  if (port == 0) {
    port = http_.bind_to_any_port(opt_.host);
    if (port < 0) throw Error(fmt::format("cannot listen on {} (any port)", opt_.host));
  } else if (!http_.bind_to_port(opt_.host, port)) {
    throw Error(fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", opt_.host, port));
  }
  raise_listen_backlog(port);
  // SIGINT / SIGTERM are blocked in every thread (see serve()) and taken here by sigwait.
  std::atomic<bool> exiting{false};
  std::thread sig([&] {
    const sigset_t set = shutdown_signals();
    int s = 0;
    sigwait(&set, &s);
    if (exiting) return;
    shutting_down_ = true;
    sched_.stop();  // cancels every job: streams write their last event
    for (int i = 0; i < 300 && in_flight_ > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    http_.stop();
    shutdown_connections(port);  // workers waiting on idle keep-alive connections
  });
  if (opt_.on_listening) opt_.on_listening(port);
  const bool ok = http_.listen_after_bind();
  exiting = !shutting_down_;
  if (exiting) pthread_kill(sig.native_handle(), SIGTERM);  // wake the signal thread
  sig.join();
  sched_.stop();
  return ok || shutting_down_ ? 0 : 1;
}

}  // namespace

void check_listen_address(const std::string& host, int port) {
  if (port == 0) return;  // any free port: nothing to check
  // Plain sockets, not cpp-httplib: its bind_to_port also starts listening and keeps the socket
  // until its server runs. Same options as serve()'s socket (set_listen_options), so this fails
  // exactly where that bind would.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || !res)
    throw Error(fmt::format("cannot listen on {}:{} (not an address of this machine)", host, port));
  bool ok = false;
  int err = 0;
  for (addrinfo* a = res; a && !ok; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    int no = 0;
    set_listen_options(fd);
    if (a->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));  // as cpp-httplib's socket
    ok = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!ok) err = errno;
    close(fd);
  }
  freeaddrinfo(res);
  if (!ok)
    throw Error(fmt::format("cannot listen on {}:{} ({}; in use, or not an address of this machine)", host, port,
                            std::strerror(err)));
}

void block_shutdown_signals() {
  const sigset_t set = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

LoadSignalWatch::LoadSignalWatch() {
  thread_ = std::thread([this] {
    const sigset_t set = shutdown_signals();
    const timespec tick{0, 100 * 1000 * 1000};
    while (!done_) {
      const int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig > 0) {
        fmt::print(stderr, "wgllm serve: {} while loading the model; stopped\n", sig == SIGINT ? "interrupted" : "terminated");
        std::fflush(stderr);
        _exit(128 + sig);  // nothing is served yet: no connection or reply to finish
      }
    }
  });
}

LoadSignalWatch::~LoadSignalWatch() {
  done_ = true;
  thread_.join();
}

int serve(Model& model, const Tokenizer& tok, const ChatTemplate* tmpl, const ServerOptions& opt) {
  block_shutdown_signals();  // before the scheduler and HTTP threads start
  signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a signal
  Server s(model, tok, tmpl, opt);
  return s.run();
}

}  // namespace wgllm::server
